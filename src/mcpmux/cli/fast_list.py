"""``mcpmux list`` without the manager, when nothing would be started anyway.

When every enabled server is lazy and the catalog cache holds fresh lists for it, ``list`` would
start no server: the rows then come from the configuration and the catalog's SQLite file alone,
read here with the standard library so that neither the manager nor the MCP SDK is imported
(about 0.5 s). The rows have the schema of :meth:`mcpmux.manager.ServerStatus.to_json`, with the
tool counts the manager's registry would give (synthetic ``read_resource``/``get_prompt``
included, a name claimed by an earlier server not counted twice).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from mcpmux.canonical_names import canonical_name
from mcpmux.config.display import redact
from mcpmux.config.effective import fingerprint, with_effective_sandbox
from mcpmux.config.models import (
    Config,
    ServerConfig,
)
from mcpmux.config.paths import data_dir
from mcpmux.types.json_shapes import JSONObject

__all__ = ["cached_tool_names", "catalog_rows", "emit_lazy_list", "lazy_rows"]

logger = logging.getLogger(__name__)

# Mirrors of mcpmux.manager.catalog's constants (importing it would import the SDK, about 0.5 s);
# tests/cli/test_manage_list.py keeps them equal.
CATALOG_FILE = "catalog.db"
SCHEMA_VERSION = 1
_LISTS = "tools, resources, resource_templates, prompts"

CatalogRow = tuple[str, list[Any], list[Any], list[Any], list[Any]]


def catalog_rows(path: Path | None = None) -> dict[str, CatalogRow]:
    """Every stored row: server -> (fingerprint, tools, resources, templates, prompts) as JSON data.

    A missing, unreadable or differently versioned file gives no rows (never created or changed).
    """
    path = path or data_dir() / CATALOG_FILE
    if not path.is_file():
        return {}
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                return {}
            rows = db.execute(f"SELECT server, fingerprint, {_LISTS} FROM catalog").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        # Only a cache: the caller falls back to the manager, which repairs or rebuilds it.
        logger.debug("catalog %s not readable here: %s", path, exc)
        return {}
    return {r[0]: (r[1], *(json.loads(c) for c in r[2:])) for r in rows}


def _is_lazy(server: ServerConfig, config: Config) -> bool:
    return server.starts_lazily(config.settings)


def lazy_rows(config: Config, rows: dict[str, CatalogRow] | None = None) -> list[JSONObject] | None:
    """The ``list`` rows, or ``None`` when some enabled server would have to be started."""
    rows = catalog_rows() if rows is None else rows
    fresh = {}
    for server in config.enabled_servers:
        row = rows.get(server.name)
        supervised = with_effective_sandbox(server, config.security)
        if not _is_lazy(server, config) or row is None or row[0] != fingerprint(supervised):
            return None
        fresh[server.name] = row
    counts = _tool_counts(config, fresh)
    now = time.time()
    return [_row(s, counts.get(s.name, 0), now, config.secret_values) for s in config.servers]


def _tool_counts(config: Config, rows: dict[str, CatalogRow]) -> dict[str, int]:
    owners: dict[str, str] = {}
    for server in config.servers:
        if server.name not in rows:
            continue
        _, tools, resources, templates, prompts = rows[server.name]
        own = [str(t.get("name")) for t in tools]
        synthetic = [n for n, has in (("read_resource", resources or templates), ("get_prompt", prompts)) if has]
        for tool in own + [n for n in synthetic if n not in own]:
            owners.setdefault(canonical_name(server.namespace, tool), server.name)
    counts: dict[str, int] = {}
    for owner in owners.values():
        counts[owner] = counts.get(owner, 0) + 1
    return counts


def _row(server: ServerConfig, tools: int, now: float, secrets: frozenset[str]) -> JSONObject:
    state, reason = ("configured", "configured") if server.enabled else ("disabled", "disabled in the configuration")
    return {
        "name": server.name,
        "type": server.type,
        "state": state,
        "reason": reason,
        "target": redact(_target(server), secrets),
        "pid": None,
        "tools": tools,
        "restarts": 0,
        "last_error": None,
        "protocol_version": None,
        "server_info": None,
        "history": [{"at": now, "state": state, "reason": reason}],
    }


def _target(server: Any) -> str:
    if getattr(server, "url", None):
        return str(server.url)
    if getattr(server, "command", None):
        return " ".join([server.command, *server.args])
    return f"builtin {getattr(server, 'kind', server.name)}"


def cached_tool_names(config: Config, *, prompts: bool = False) -> list[str]:
    """Canonical tool (or prompt) names from the catalog cache, any fingerprint: for shell completion."""
    rows = catalog_rows()
    names = []
    for server in config.servers:
        if server.name in rows:
            _, tools, _, _, listed_prompts = rows[server.name]
            items = listed_prompts if prompts else tools
            names += [canonical_name(server.namespace, str(t.get("name"))) for t in items]
    return names


def emit_lazy_list() -> bool:
    """Print ``mcpmux list`` from the configuration and the catalog if no server must start."""
    from mcpmux.cli.output import command_config, emit, state, table

    config = command_config()
    rows = lazy_rows(config)
    if rows is None:
        return False
    state().secrets = config.secret_values

    def render_rows() -> None:
        table(
            ["server", "type", "state", "tools", "target", "last error"],
            [(r["name"], r["type"], r["state"], r["tools"], r["target"], "") for r in rows],
        )

    emit(rows, render_rows)
    return True
