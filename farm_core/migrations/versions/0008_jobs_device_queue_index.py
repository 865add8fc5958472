"""jobs: an index for a device's next queued jobs

A fill of a device's queue (farm_core.device_queue) reads the device's next queued jobs by
priority, then in order: with (device_key, state, priority DESC, id) it reads those rows
alone instead of sorting every queued job of the device.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 19:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_jobs_device_queue", "jobs", ["device_key", "state", sa.text("priority DESC"), "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_device_queue", table_name="jobs")
