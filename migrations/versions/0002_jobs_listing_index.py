"""jobs listing index: a tenant's jobs, newest first, page by page

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 18:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_tenant_listing", "jobs", ["tenant_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_listing", table_name="jobs")
