"""Servers disabled at run time, kept across restarts and shared by replicas.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcpmux_server_switches",
        sa.Column("identity", sa.String(200), primary_key=True),
        sa.Column("server", sa.String(200), primary_key=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("changed_at", sa.Float, nullable=False),
        sa.Column("changed_by", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("mcpmux_server_switches")
