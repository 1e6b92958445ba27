"""batches; jobs wait for admission (admitted_at), batch documents are read when admitted;
webhook deliveries for batches

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 19:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batches",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(36), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("name", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("pages", sa.String(500)),
        sa.Column("webhook_url", sa.Text()),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("tenant_id", "idempotency_key"),
    )
    op.create_index("ix_batches_tenant_id", "batches", ["tenant_id"])
    op.create_index("ix_batches_status", "batches", ["status"])
    op.create_index("ix_batches_tenant_listing", "batches", ["tenant_id", "created_at", "id"])
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(
            sa.Column(
                "batch_id", sa.String(36), sa.ForeignKey("batches.id", name="fk_jobs_batch_id")
            )
        )
        batch_op.add_column(sa.Column("admitted_at", sa.DateTime(timezone=True)))
        batch_op.add_column(sa.Column("input_key", sa.String(1000)))
        batch_op.add_column(sa.Column("page_selection", sa.String(500)))
    # Jobs from before admission existed were all dispatched at submit.
    op.execute("UPDATE jobs SET admitted_at = created_at")
    op.create_index("ix_jobs_batch_listing", "jobs", ["batch_id", "created_at", "id"])
    # What the feeder scans each round: only the waiting rows.
    op.create_index(
        "ix_jobs_waiting",
        "jobs",
        ["tenant_id", "priority", "created_at"],
        postgresql_where=sa.text("admitted_at IS NULL AND status = 'queued'"),
        sqlite_where=sa.text("admitted_at IS NULL AND status = 'queued'"),
    )
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.alter_column("job_id", existing_type=sa.String(36), nullable=True)
        batch_op.add_column(
            sa.Column(
                "batch_id",
                sa.String(36),
                sa.ForeignKey(
                    "batches.id", name="fk_webhook_deliveries_batch_id", ondelete="CASCADE"
                ),
            )
        )
        batch_op.create_index("ix_webhook_deliveries_batch_id", ["batch_id"])


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.drop_index("ix_webhook_deliveries_batch_id")
        batch_op.drop_column("batch_id")
    op.execute("DELETE FROM webhook_deliveries WHERE job_id IS NULL")
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.alter_column("job_id", existing_type=sa.String(36), nullable=False)
    op.drop_index("ix_jobs_waiting", table_name="jobs")
    op.drop_index("ix_jobs_batch_listing", table_name="jobs")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("page_selection")
        batch_op.drop_column("input_key")
        batch_op.drop_column("admitted_at")
        batch_op.drop_column("batch_id")
    op.drop_table("batches")
