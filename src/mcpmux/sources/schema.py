"""The tables of the source registry (SQLAlchemy Core), the same on SQLite and PostgreSQL.

Alembic migrations (:mod:`mcpmux.sources.migrations`) create and change them; this module is what
the code reads and writes through.
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, ForeignKey, LargeBinary, MetaData, String, Table, Text

__all__ = ["metadata", "source_secrets", "source_tools", "sources"]

metadata = MetaData()

sources = Table(
    "mcpmux_sources",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(32), nullable=False, unique=True),
    Column("description", Text, nullable=False, default=""),
    Column("source_type", String(16), nullable=False),
    Column("url", Text, nullable=True),
    Column("lifecycle", String(16), nullable=False, default="singleton"),
    # The server entry with ${VAR} references where secrets go; never a secret value.
    Column("entry", JSON, nullable=False),
    # Declared variables: [{name, description, is_required, is_secret, default}].
    Column("variables", JSON, nullable=False),
    # Values of variables that are not secret.
    Column("plain_values", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("synced_at", DateTime(timezone=True), nullable=True),
)

source_secrets = Table(
    "mcpmux_source_secrets",
    metadata,
    Column("source_id", String(36), ForeignKey("mcpmux_sources.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("sealed", LargeBinary, nullable=False),
)

source_tools = Table(
    "mcpmux_source_tools",
    metadata,
    Column("source_id", String(36), ForeignKey("mcpmux_sources.id", ondelete="CASCADE"), primary_key=True),
    Column("name", String(128), primary_key=True),
    Column("description", Text, nullable=False, default=""),
    Column("input_schema", JSON, nullable=False),
    Column("annotations", JSON, nullable=True),
    Column("execution_mode", String(16), nullable=False),
    Column("synced_at", DateTime(timezone=True), nullable=False),
)
