"""Indexes for a database of millions of pages: partial indexes for what retention and the
reconciler scan, and three indexes dropped that others already lead with

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

RESULTS_KEPT = sa.text("results_deleted_at IS NULL AND deleted_at IS NULL")
PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    op.create_index(
        "ix_jobs_retention",
        "jobs",
        ["finished_at"],
        postgresql_where=RESULTS_KEPT,
        sqlite_where=RESULTS_KEPT,
    )
    op.create_index(
        "ix_webhook_deliveries_pending",
        "webhook_deliveries",
        ["created_at"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.drop_index("ix_jobs_tenant_id", table_name="jobs")
    op.drop_index("ix_pages_job_id", table_name="pages")
    op.drop_index("ix_page_groups_job_id", table_name="page_groups")


def downgrade() -> None:
    op.create_index("ix_page_groups_job_id", "page_groups", ["job_id"])
    op.create_index("ix_pages_job_id", "pages", ["job_id"])
    op.create_index("ix_jobs_tenant_id", "jobs", ["tenant_id"])
    op.drop_index("ix_webhook_deliveries_pending", table_name="webhook_deliveries")
    op.drop_index("ix_jobs_retention", table_name="jobs")
