"""campaigns.refusals: what submission refused (device, configuration, reason)

A device that cannot run a configuration (a phone without the Hexagon libraries, without
the named NNAPI accelerator, ...) is refused at submission and gets no job. The refusals
are kept with the campaign, as they were decided, so that `results --delegates` and the
dashboard show them later whatever the devices' facts have become. Existing campaigns get
NULL: no record (they were submitted before refusals were kept).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-11 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("refusals", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("refusals")
