"""audit_events (append-only, enforced by triggers) and api_keys.expires_at (rotation overlap)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The database itself refuses to change or remove an audit row, so a bug or a hand-typed
# statement cannot rewrite history; only dropping the table (a migration) can.
_POSTGRES_GUARD = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_events_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
"""
_SQLITE_GUARDS = [
    f"CREATE TRIGGER audit_events_no_{verb.lower()} BEFORE {verb} ON audit_events "
    f"BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: {verb} refused'); END"
    for verb in ("UPDATE", "DELETE")
]


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("tenant_id", sa.String(36)),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(200)),
        sa.Column("request_id", sa.String(128)),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_audit_events_occurred_at", "audit_events", ["occurred_at"])
    op.create_index("ix_audit_events_tenant", "audit_events", ["tenant_id", "occurred_at"])
    op.create_index("ix_audit_events_action", "audit_events", ["action", "occurred_at"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_POSTGRES_GUARD)
    else:
        for statement in _SQLITE_GUARDS:
            op.execute(statement)
    with op.batch_alter_table("api_keys") as batch_op:
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch_op:
        batch_op.drop_column("expires_at")
    op.drop_table("audit_events")  # its triggers go with it
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION audit_events_append_only()")
