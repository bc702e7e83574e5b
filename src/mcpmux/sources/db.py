"""The registry's database: SQLite in the data dir by default, PostgreSQL by URL; migrated on open.

``sqlite:///PATH`` (the default is ``<data dir>/sources.db``) or the one database of every part
(:func:`mcpmux.store.database.configured_url`: ``MCPMUX_DB`` or ``storage.url``), for example
``postgresql+psycopg://USER@HOST/DB`` (psycopg 3). Alembic brings it to the newest revision when
the registry opens, under its own version table, so the registry can share a database with the
other parts of mcpmux and with other applications.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from mcpmux.config.paths import DB_ENV, configured_url, data_dir
from mcpmux.store.database import Migrations, open_engine as _open

__all__ = ["DB_ENV", "DEFAULT_FILE", "MIGRATIONS", "default_url", "open_engine"]

DEFAULT_FILE = "sources.db"
MIGRATIONS = Migrations(Path(__file__).resolve().parent / "migrations", "mcpmux_sources_alembic", "0001")


def default_url() -> str:
    """``MCPMUX_DB`` when set, else the SQLite file in the data dir."""
    return configured_url() or f"sqlite:///{data_dir() / DEFAULT_FILE}"


def open_engine(url: str | None = None) -> Engine:
    """An engine for ``url`` (default :func:`default_url`), its schema migrated to the newest revision.

    Raises:
        ConfigError: the URL is not a usable database URL, or the database cannot be reached or migrated.
    """
    return _open(url or default_url(), MIGRATIONS, "the source registry")
