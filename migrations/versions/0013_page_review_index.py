"""pages: the review list's partial index, built without locking the table

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 20:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

TO_REVIEW = sa.text("needs_review AND reviewed_at IS NULL")


def upgrade() -> None:
    # Only the pages still to review, oldest first. Built CONCURRENTLY, outside the migration's
    # transaction: a plain CREATE INDEX would hold the pages table for the whole scan of its ten
    # million rows, every worker's page writes waiting behind it.
    with op.get_context().autocommit_block():
        op.create_index(
            "ix_pages_to_review",
            "pages",
            ["finished_at", "id"],
            postgresql_where=TO_REVIEW,
            sqlite_where=TO_REVIEW,
            postgresql_concurrently=True,
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("ix_pages_to_review", table_name="pages", postgresql_concurrently=True)
