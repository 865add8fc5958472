"""configurations as data: jobs.config and results.config hold a canonical configuration

A configuration is now a delegate with its options (`nnapi:accelerator=google-edgetpu;
fp16=true`, farm_core.configs), stored by its canonical string: up to 128 characters
instead of 32. The presets keep their stored names (`cpu`, `gpu-fp32`, `gpu-fp16`), so
existing rows are unchanged.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("jobs", "results")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                "config", existing_type=sa.String(32), type_=sa.String(128), existing_nullable=False
            )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                "config", existing_type=sa.String(128), type_=sa.String(32), existing_nullable=False
            )
