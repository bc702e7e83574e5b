"""The registry's database: SQLite in the data dir by default, PostgreSQL by URL; migrated on open.

``sqlite:///PATH`` (the default is ``<data dir>/sources.db``) runs in WAL mode with foreign keys and a
busy timeout; ``postgresql+psycopg://USER@HOST/DB`` (psycopg 3) runs the same schema. Alembic brings
either to the newest revision when the registry opens, under its own version table, so the registry
can share a database with other applications.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import SQLAlchemyError

from mcpmux.config.paths import data_dir
from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["DB_ENV", "DEFAULT_FILE", "default_url", "migrate", "open_engine"]

DB_ENV = "MCPMUX_DB"
DEFAULT_FILE = "sources.db"
_BUSY_TIMEOUT_S = 5.0
_MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def default_url() -> str:
    """``MCPMUX_DB`` when set, else the SQLite file in the data dir."""
    return os.environ.get(DB_ENV) or f"sqlite:///{data_dir() / DEFAULT_FILE}"


def open_engine(url: str | None = None) -> Engine:
    """An engine for ``url`` (default :func:`default_url`), its schema migrated to the newest revision.

    Raises:
        ConfigError: the URL is not a usable database URL, or the database cannot be reached or migrated.
    """
    chosen = url or default_url()
    if chosen.startswith("postgresql://"):
        chosen = "postgresql+psycopg://" + chosen.removeprefix("postgresql://")
    try:
        if chosen.startswith("sqlite:///"):
            path = chosen.removeprefix("sqlite:///")
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(chosen, connect_args={"timeout": _BUSY_TIMEOUT_S})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(chosen, pool_pre_ping=True)
        migrate(engine)
    except (SQLAlchemyError, ImportError, ValueError, OSError) as exc:
        raise ConfigError(ConfigProblem(_shown(chosen), "", f"cannot open the source registry: {exc}")) from exc
    return engine


def migrate(engine: Engine) -> None:
    """Bring the registry's tables to the newest revision (idempotent)."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(_MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _shown(url: str) -> str:
    """``url`` without its password."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        credentials, _, host = rest.rpartition("@")
        user = credentials.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{host}" if ":" in credentials else url
    return url
