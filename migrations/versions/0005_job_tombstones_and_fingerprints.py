"""jobs: request_fingerprint (an Idempotency-Key reused for another request is refused),
deleted_at/deleted_by (DELETE keeps a tombstone); canceled jobs' unstarted pages say canceled

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("request_fingerprint", sa.String(64)))
        batch_op.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("deleted_by", sa.String(200)))
    # Jobs canceled before this release left their unstarted pages pending for ever.
    op.execute(
        "UPDATE pages SET status = 'canceled' WHERE status IN ('pending', 'running') "
        "AND job_id IN (SELECT id FROM jobs WHERE status = 'canceled')"
    )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("deleted_by")
        batch_op.drop_column("deleted_at")
        batch_op.drop_column("request_fingerprint")
