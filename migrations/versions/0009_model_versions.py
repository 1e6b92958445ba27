"""jobs.model_version (the version chosen at submit; earlier jobs: "default"), and each page's
model_version and engine (what produced its result)

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-03 23:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(
            sa.Column("model_version", sa.String(64), nullable=False, server_default="default")
        )
    op.create_index("ix_jobs_model_version", "jobs", ["model_version"])
    with op.batch_alter_table("pages") as batch_op:
        batch_op.add_column(sa.Column("model_version", sa.String(64)))
        batch_op.add_column(sa.Column("engine", sa.String(32)))


def downgrade() -> None:
    with op.batch_alter_table("pages") as batch_op:
        batch_op.drop_column("engine")
        batch_op.drop_column("model_version")
    op.drop_index("ix_jobs_model_version", table_name="jobs")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("model_version")
