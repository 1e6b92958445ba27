"""jobs.content_digest, jobs.reused_from, reuse_results on jobs and batches: a document seen
before (same bytes, pages and engine) can take the finished results instead of running again

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 20:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("content_digest", sa.String(64)))
        batch_op.add_column(sa.Column("reused_from", sa.String(36)))
        batch_op.add_column(
            sa.Column("reuse_results", sa.Boolean(), nullable=False, server_default="false")
        )
    op.create_index("ix_jobs_content", "jobs", ["tenant_id", "content_digest"])
    with op.batch_alter_table("batches") as batch_op:
        batch_op.add_column(
            sa.Column("reuse_results", sa.Boolean(), nullable=False, server_default="false")
        )


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch_op:
        batch_op.drop_column("reuse_results")
    op.drop_index("ix_jobs_content", table_name="jobs")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("reuse_results")
        batch_op.drop_column("reused_from")
        batch_op.drop_column("content_digest")
