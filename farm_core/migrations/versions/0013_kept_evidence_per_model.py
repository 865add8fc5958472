"""kept_evidence: one row per model, so that a page reads the rows of the models it shows

At 100 models x 1,000 devices the one row of a scope's evidence was 14.5 MB compressed and
took 3 s to read, for a page that shows a few models. A row now holds one model's evidence,
keyed by scope, model and evidence version. A cache: the table is made anew (its rows are
gathered again as pages need them), both ways.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 10:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _table(*keys: str) -> None:
    op.create_table(
        "kept_evidence",
        *(sa.Column(k, sa.String(64), primary_key=True) for k in keys),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("read_at", sa.DateTime(), nullable=False),
    )


def upgrade() -> None:
    op.drop_table("kept_evidence")
    _table("scope", "model", "version")


def downgrade() -> None:
    op.drop_table("kept_evidence")
    _table("scope", "version")
