"""results.peak_memory_mb: the peak memory of a job's benchmark (MB), for every device kind

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 13:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("peak_memory_mb", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("peak_memory_mb")
