"""kept_evidence: the allowlists' gathered evidence, kept per scope and evidence version

The compatibility page decides 4,000 model x device entries from an aggregate over every
result; a fresh dashboard process took seconds to read and gather it. The gathered
evidence (what no threshold changes) is kept here, compressed, per scope (all projects or
some) and evidence version: the first process to need a version stores it, the others read
one row. A cache: rows of older versions are deleted as newer ones are stored.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 13:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kept_evidence",
        sa.Column("scope", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("read_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("kept_evidence")
