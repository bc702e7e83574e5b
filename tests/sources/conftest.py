"""The storage suite runs on both databases: SQLite in a temporary directory, and a real PostgreSQL
server (Debian's ``initdb``/``postgres``, a throwaway cluster on 127.0.0.1 for the session, a fresh
database per test)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mcpmux.sources import SourceRegistry
from tests.field.processes import postgres_cluster

KEY = bytes(range(32))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL cluster on 127.0.0.1 for the whole session; its DSN (database ``postgres``)."""
    with postgres_cluster() as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sources.db'}"
        return
    dsn: str = request.getfixturevalue("postgres_server")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield "postgresql+psycopg://" + dsn.removeprefix("postgresql://").rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def registry(database_url: str) -> Iterator[SourceRegistry]:
    """A registry on :func:`database_url` with a fixed key."""
    opened = SourceRegistry(database_url, key=KEY)
    try:
        yield opened
    finally:
        opened.close()
