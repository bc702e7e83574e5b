"""Alembic environment of the source registry: runs on the connection that
:class:`mcpmux.store.database.Migrations` passes."""

from __future__ import annotations

from alembic import context

from mcpmux.sources.schema import metadata

connection = context.config.attributes["connection"]
version_table = context.config.attributes["version_table"]
context.configure(connection=connection, target_metadata=metadata, version_table=version_table)
with context.begin_transaction():
    context.run_migrations()
