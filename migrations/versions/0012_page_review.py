"""pages: the engine's confidence, and the review list's columns (pages worth a human look)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07 20:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A nullable column, and one with a constant default: no table rewrite on Postgres 11+, so
    # a database of ten million page rows takes them at once.
    with op.batch_alter_table("pages") as batch_op:
        batch_op.add_column(sa.Column("confidence", sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("needs_review", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("reviewed_by", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pages") as batch_op:
        for column in ("reviewed_by", "reviewed_at", "needs_review", "confidence"):
            batch_op.drop_column(column)
