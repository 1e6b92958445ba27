"""webhook_deliveries.attempts_before_resend: a resent dead letter gets a fresh set of retries

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 11:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.add_column(
            sa.Column("attempts_before_resend", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch_op:
        batch_op.drop_column("attempts_before_resend")
