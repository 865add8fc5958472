"""jobs.model_name: a model's lineage (history by name across versions)

Existing jobs take the name their model was first stored under (its file name).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("model_name", sa.String(length=255), nullable=False, server_default="")
        )
    op.execute(
        "UPDATE jobs SET model_name = "
        "(SELECT models.name FROM models WHERE models.sha256 = jobs.model_sha256)"
    )
    op.create_index("ix_jobs_lineage", "jobs", ["model_name", "device_key", "config"])


def downgrade() -> None:
    op.drop_index("ix_jobs_lineage", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("model_name")
