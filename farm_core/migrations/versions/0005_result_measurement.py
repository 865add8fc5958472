"""results.measurement and results.config_fingerprint: how a figure was measured

Existing results keep an empty record and fingerprint: they compare only with each other.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 00:10:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    with op.batch_alter_table("results") as batch:
        batch.add_column(
            sa.Column("measurement", json_type, nullable=False, server_default=sa.text("'{}'"))
        )
        batch.add_column(
            sa.Column("config_fingerprint", sa.String(length=64), nullable=False, server_default="")
        )
    op.create_index("ix_results_config_fingerprint", "results", ["config_fingerprint"])


def downgrade() -> None:
    op.drop_index("ix_results_config_fingerprint", table_name="results")
    with op.batch_alter_table("results") as batch:
        batch.drop_column("config_fingerprint")
        batch.drop_column("measurement")
