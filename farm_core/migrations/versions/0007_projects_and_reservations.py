"""projects, owners and reservations: a lab shared by teams

`campaigns.project` and `campaigns.owner` say which project (team) a campaign belongs to and
which user submitted it; `jobs.project` repeats the project so that quotas and fair
scheduling read it without a join. `projects` holds each project's quotas (NULL: none).
`reservations` holds a user's hold on a named device for a time window. Existing campaigns
and jobs belong to the project `default` and have no owner.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 16:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("max_concurrent_jobs", sa.Integer(), nullable=True),
        sa.Column("device_minutes_per_day", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "reservations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("device_key", sa.String(255), sa.ForeignKey("devices.key"), nullable=False),
        sa.Column("user", sa.String(64), nullable=False),
        sa.Column("project", sa.String(64), nullable=False),
        sa.Column("starts_at", sa.DateTime(), nullable=False),
        sa.Column("ends_at", sa.DateTime(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("cancelled_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_reservations_device_window", "reservations", ["device_key", "ends_at"])
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(
            sa.Column("project", sa.String(64), nullable=False, server_default="default")
        )
        batch.add_column(sa.Column("owner", sa.String(64), nullable=False, server_default=""))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("project", sa.String(64), nullable=False, server_default="default")
        )
    op.create_index("ix_jobs_project_state", "jobs", ["project", "state"])


def downgrade() -> None:
    op.drop_index("ix_jobs_project_state", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("project")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("owner")
        batch.drop_column("project")
    op.drop_index("ix_reservations_device_window", table_name="reservations")
    op.drop_table("reservations")
    op.drop_table("projects")
