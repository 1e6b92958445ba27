"""page_texts: each read page's words for full-text search, and its lines' boxes for the hits

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "page_texts",
        sa.Column(
            "job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("page_no", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(36), nullable=False),
        sa.Column("document", postgresql.TSVECTOR() if postgres else sa.Text(), nullable=False),
        sa.Column("lines", sa.JSON(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "page_no"),
    )
    # One GIN index led by the tenant (btree_gin lets a GIN index hold a plain column): a
    # tenant's query reads only its own pages' entries. A new, empty table: no lock to fear.
    if postgres:
        op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.create_index(
        "ix_page_texts_search", "page_texts", ["tenant_id", "document"], postgresql_using="gin"
    )


def downgrade() -> None:
    op.drop_table("page_texts")
