"""jobs.progress and campaigns.gate: what a running job is doing, and the CI gate's verdict

`jobs.progress` holds a running job's newest progress line (its worker writes it with each
lease renewal), so that a waiting client on any host can show it. `campaigns.gate` holds
the verdict `submit --wait` reached, so that `status` and `results` show a regression the
gate flagged. Existing rows get an empty line and no verdict.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 01:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(JSONB(), "postgresql")
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("progress", sa.Text(), nullable=False, server_default=""))
    # NOTE: a plain string default: a SQL expression would make SQLite's batch mode copy
    # the table, and campaigns cannot be dropped under the jobs that reference it
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("gate", json_type, nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("gate")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("progress")
