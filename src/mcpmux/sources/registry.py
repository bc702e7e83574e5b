"""The persistent source registry: sources, sealed secrets and synced tools on SQL storage.

``SourceRegistry()`` opens ``<data dir>/sources.db`` (SQLite, WAL), ``SourceRegistry(url)`` any
SQLAlchemy URL (``postgresql+psycopg://...``); the schema is migrated on open. Every change is one
transaction: a source is stored whole or not at all. Secret values are sealed
(:mod:`mcpmux.sources.sealing`) and never leave the registry except inside a server config built
to run the source (:meth:`SourceRegistry.server_config`).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine, Row, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from mcpmux.config.models import Config, ServerConfig
from mcpmux.config.paths import configured_url
from mcpmux.errors import NotFound, SourceError, SourceExists, closest
from mcpmux.sources.db import open_engine
from mcpmux.sources.entries import materialise, prepare
from mcpmux.sources.models import ExecutionMode, Source, SourceSpec, SourceTool, Variable
from mcpmux.sources.schema import source_secrets, source_tools, sources
from mcpmux.sources.sealing import SecretBox, load_key
from mcpmux.store.database import notify

__all__ = ["SourceRegistry"]

_PATCHABLE = frozenset({"description", "lifecycle", "environment", "config", "url"})


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class SourceRegistry:
    """Registered sources on one database.

    Args:
        url: a SQLAlchemy URL; default ``MCPMUX_DB`` or ``<data dir>/sources.db``.
        key: the 32-byte secret key; default :func:`~mcpmux.sources.sealing.load_key`.
        engine: an engine to use instead of opening ``url`` (already migrated).

    Raises:
        ConfigError: the database cannot be opened or migrated, or the key is unusable.
    """

    def __init__(self, url: str | None = None, *, key: bytes | None = None, engine: Engine | None = None) -> None:
        self.engine = engine or open_engine(url)
        self._box = SecretBox(key if key is not None else load_key())

    @classmethod
    def configured(cls, config: Config, url: str | None = None) -> SourceRegistry:
        """The registry of a command: ``url`` (``--db``) when given, else ``MCPMUX_DB``, else the
        config's ``storage.url``, else ``<data dir>/sources.db``."""
        return cls(url or configured_url(config.storage.url))

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()

    # -- sources -------------------------------------------------------------------------------

    def add(self, spec: SourceSpec, *, reserved: Iterable[str] = ()) -> Source:
        """Register ``spec``.

        Args:
            spec: the source.
            reserved: names taken elsewhere (the configuration's servers).

        Raises:
            SourceError: ``spec`` is invalid (nothing stored).
            SourceExists: the name is taken.
        """
        if spec.name in set(reserved):
            raise SourceExists(spec.name, "a server of the configuration has this name (it is read-only here)")
        prepared = prepare(spec)
        now, source_id = _now(), uuid.uuid4().hex
        row = {
            "id": source_id,
            "name": spec.name,
            "description": spec.description,
            "source_type": spec.source_type,
            "url": spec.url,
            "lifecycle": spec.lifecycle,
            "entry": prepared.entry,
            "variables": [v.to_json() for v in prepared.variables],
            "plain_values": prepared.plain,
            "created_at": now,
            "updated_at": now,
            "synced_at": None,
        }
        try:
            with self.engine.begin() as db:
                db.execute(insert(sources).values(**row))
                self._seal_all(db, source_id, spec.name, prepared.secrets)
                notify(db, "sources", spec.name)
        except IntegrityError as exc:
            raise SourceExists(spec.name, "a source of this name is registered") from exc
        return self.get(source_id)

    def get(self, key: str) -> Source:
        """The source whose id or name is ``key``.

        Raises:
            NotFound: no such source (closest names suggested).
        """
        with self.engine.connect() as db:
            row = db.execute(select(sources).where(or_(sources.c.id == key, sources.c.name == key))).first()
            if row is None:
                names = [r.name for r in db.execute(select(sources.c.name))]
                raise NotFound("source", key, closest(key, names))
            return self._source(db, row)

    def all(self) -> list[Source]:
        """Every registered source, by name."""
        with self.engine.connect() as db:
            return [self._source(db, row) for row in db.execute(select(sources).order_by(sources.c.name))]

    def update(self, key: str, changes: dict[str, Any]) -> Source:
        """Change a source's ``description``, ``lifecycle``, ``url``, ``config`` or ``environment``.

        ``environment`` values replace the given variables only (others keep their values);
        ``config`` replaces the server fields. The result is checked like a new source.

        Raises:
            NotFound: no such source.
            SourceError: an unknown field, or the changed source is invalid (nothing stored).
        """
        unknown = sorted(set(changes) - _PATCHABLE)
        if unknown:
            raise SourceError(key, f"cannot change {', '.join(unknown)} (changeable: {', '.join(sorted(_PATCHABLE))})")
        current = self.get(key)
        values = {**current.plain_values, **self._secrets(current), **changes.get("environment", {})}
        lifecycle = changes.get("lifecycle", current.lifecycle)
        if lifecycle not in ("singleton", "transient"):
            raise SourceError(current.name, f"lifecycle must be singleton or transient, not {lifecycle!r}")
        if "config" in changes or "url" in changes:
            spec = SourceSpec(
                name=current.name,
                source_type=current.source_type,
                url=changes.get("url", current.url),
                config=changes.get("config", _config_of(current)),
                environment=values,
                lifecycle=lifecycle,
            )
            prepared = prepare(spec)
            entry, variables, plain, secrets = prepared.entry, prepared.variables, prepared.plain, prepared.secrets
        else:
            entry, variables = current.entry, current.variables
            declared = {v.name: v for v in variables}
            plain = {k: v for k, v in values.items() if k in declared and not declared[k].is_secret}
            secrets = {k: v for k, v in values.items() if k not in plain}
            materialise(current.name, entry, values, lifecycle)
        row = {
            "description": changes.get("description", current.description),
            "url": changes.get("url", current.url),
            "lifecycle": lifecycle,
            "entry": entry,
            "variables": [v.to_json() for v in variables],
            "plain_values": plain,
            "updated_at": _now(),
        }
        with self.engine.begin() as db:
            db.execute(update(sources).where(sources.c.id == current.id).values(**row))
            db.execute(delete(source_secrets).where(source_secrets.c.source_id == current.id))
            self._seal_all(db, current.id, current.name, secrets)
            notify(db, "sources", current.name)
        return self.get(current.id)

    def remove(self, key: str) -> Source:
        """Unregister a source (its secrets and tools go with it).

        Raises:
            NotFound: no such source.
        """
        current = self.get(key)
        with self.engine.begin() as db:
            db.execute(delete(source_tools).where(source_tools.c.source_id == current.id))
            db.execute(delete(source_secrets).where(source_secrets.c.source_id == current.id))
            db.execute(delete(sources).where(sources.c.id == current.id))
            notify(db, "sources", current.name)
        return current

    # -- running them ----------------------------------------------------------------------------

    def server_config(self, source: Source, environment: Mapping[str, str] | None = None) -> ServerConfig:
        """The server config that runs ``source``, its secrets opened.

        ``environment``: values that replace stored ones (a change to check before it is made).

        Raises:
            ConfigError: a secret does not open (the key changed).
            SourceError: a variable without a value, or fields that do not validate.
        """
        values = {**source.plain_values, **self._secrets(source), **(environment or {})}
        return materialise(source.name, source.entry, values, source.lifecycle)

    def with_sources(self, config: Config) -> Config:
        """``config`` plus every registered source as a server (a configured server of the same name wins)."""
        taken = {s.name for s in config.servers}
        added = [self.server_config(s) for s in self.all() if s.name not in taken]
        secrets = frozenset().union(*(s.secret_values for s in added)) if added else frozenset()
        return config.model_copy(
            update={"servers": (*config.servers, *added), "secret_values": config.secret_values | secrets}
        )

    # -- tools -----------------------------------------------------------------------------------

    def store_tools(self, key: str, tools: Sequence[dict[str, Any]]) -> list[SourceTool]:
        """Replace the stored tools of a source with ``tools`` (``name``, ``description``,
        ``input_schema``, ``annotations``) and mark it synced now."""
        current = self.get(key)
        now = _now()
        rows = [
            {
                "source_id": current.id,
                "name": t["name"],
                "description": t.get("description") or "",
                "input_schema": t.get("input_schema") or {},
                "annotations": t.get("annotations"),
                "execution_mode": current.execution_mode,
                "synced_at": now,
            }
            for t in tools
        ]
        with self.engine.begin() as db:
            db.execute(delete(source_tools).where(source_tools.c.source_id == current.id))
            if rows:
                db.execute(insert(source_tools), rows)
            db.execute(update(sources).where(sources.c.id == current.id).values(synced_at=now))
            notify(db, "sources", current.name)
        return self.tools(source=current.id)

    def tools(self, *, source: str | None = None, search: str | None = None) -> list[SourceTool]:
        """Stored tools, of one source (id or name) and/or whose name or description contains ``search``."""
        query = select(source_tools, sources.c.name.label("source_name")).join(
            sources, sources.c.id == source_tools.c.source_id
        )
        if source is not None:
            query = query.where(or_(sources.c.id == source, sources.c.name == source))
        with self.engine.connect() as db:
            rows = db.execute(query.order_by(sources.c.name, source_tools.c.name)).all()
        found = [_tool(row) for row in rows]
        if search:
            needle = search.lower()
            found = [t for t in found if needle in t.name.lower() or needle in t.description.lower()]
        return found

    # -- internals -------------------------------------------------------------------------------

    def _seal_all(self, db: Connection, source_id: str, name: str, secrets: dict[str, str]) -> None:
        rows = [
            {"source_id": source_id, "name": var, "sealed": self._box.seal(value, source=source_id, name=var)}
            for var, value in secrets.items()
        ]
        if rows:
            db.execute(insert(source_secrets), rows)

    def _secrets(self, source: Source) -> dict[str, str]:
        with self.engine.connect() as db:
            rows = db.execute(select(source_secrets).where(source_secrets.c.source_id == source.id)).all()
        return {row.name: self._box.open(bytes(row.sealed), source=source.id, name=row.name) for row in rows}

    def _source(self, db: Connection, row: Row[Any]) -> Source:
        names = db.execute(
            select(source_secrets.c.name).where(source_secrets.c.source_id == row.id).order_by(source_secrets.c.name)
        )
        return Source(
            id=row.id,
            name=row.name,
            description=row.description,
            source_type=row.source_type,
            url=row.url,
            lifecycle=row.lifecycle,
            entry=dict(row.entry),
            variables=tuple(_variable(v) for v in row.variables),
            plain_values=dict(row.plain_values),
            secret_names=tuple(r.name for r in names),
            created_at=_aware(row.created_at),
            updated_at=_aware(row.updated_at),
            synced_at=_aware(row.synced_at) if row.synced_at is not None else None,
        )


def _config_of(source: Source) -> dict[str, Any]:
    entry = dict(source.entry)
    if source.source_type == "openapi":
        entry.pop("type", None)
        entry.pop("spec", None)
    return entry


def _variable(data: dict[str, Any]) -> Variable:
    return Variable(
        name=data["name"],
        description=data.get("description") or "",
        is_required=bool(data.get("isRequired")),
        is_secret=bool(data.get("isSecret")),
        default=data.get("default"),
    )


def _tool(row: Row[Any]) -> SourceTool:
    mode: ExecutionMode = "sync_http" if row.execution_mode == "sync_http" else "mcp_call"
    return SourceTool(
        source_id=row.source_id,
        source_name=row.source_name,
        name=row.name,
        description=row.description,
        input_schema=dict(row.input_schema),
        annotations=dict(row.annotations) if row.annotations is not None else None,
        execution_mode=mode,
    )


def _aware(value: datetime.datetime) -> datetime.datetime:
    # SQLite hands back naive datetimes: every stored time is UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
