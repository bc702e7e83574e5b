"""The source registry: sources, their sealed secrets and their synced tools.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcpmux_sources",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(32), nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("source_type", sa.String(16), nullable=False),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("lifecycle", sa.String(16), nullable=False),
        sa.Column("entry", sa.JSON, nullable=False),
        sa.Column("variables", sa.JSON, nullable=False),
        sa.Column("plain_values", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "mcpmux_source_secrets",
        sa.Column("source_id", sa.String(36), sa.ForeignKey("mcpmux_sources.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "mcpmux_source_tools",
        sa.Column("source_id", sa.String(36), sa.ForeignKey("mcpmux_sources.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("input_schema", sa.JSON, nullable=False),
        sa.Column("annotations", sa.JSON, nullable=True),
        sa.Column("execution_mode", sa.String(16), nullable=False),
        sa.Column("synced_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("mcpmux_source_tools")
    op.drop_table("mcpmux_source_secrets")
    op.drop_table("mcpmux_sources")
