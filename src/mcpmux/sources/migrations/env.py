"""Alembic environment of the source registry: runs on the connection :func:`mcpmux.sources.db.migrate` passes."""

from __future__ import annotations

from alembic import context

from mcpmux.sources.schema import metadata

VERSION_TABLE = "mcpmux_sources_alembic"

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
