"""What gateway replicas sharing the database need: who is up, the request-state key, held approvals.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcpmux_replicas",
        sa.Column("id", sa.String(63), primary_key=True),
        sa.Column("advertise", sa.Text, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("sessions", sa.Integer, nullable=False),
        sa.Column("in_flight", sa.Integer, nullable=False),
    )
    op.create_table(
        "mcpmux_cluster_keys",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "mcpmux_held_approvals",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("replica", sa.String(63), nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("held_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("answer", sa.String(16), nullable=True),
        sa.Column("answered_by", sa.Text, nullable=True),
    )
    op.create_index("mcpmux_held_approvals_expires", "mcpmux_held_approvals", ["expires_at"])


def downgrade() -> None:
    op.drop_table("mcpmux_held_approvals")
    op.drop_table("mcpmux_cluster_keys")
    op.drop_table("mcpmux_replicas")
