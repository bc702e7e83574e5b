"""Other MCP hosts' configuration files: where they live, reading them in, writing ours out.

Hosts and their files (``project`` is relative to the current directory):

=============== ========================== ====================================================
host            project                    user
=============== ========================== ====================================================
claude-desktop  (none)                     Linux ``$XDG_CONFIG_HOME/Claude/claude_desktop_config.json``,
                                           macOS ``~/Library/Application Support/Claude/...``,
                                           Windows ``%APPDATA%\\Claude\\...``
claude-code     ``.mcp.json``              ``~/.claude.json``
cursor          ``.cursor/mcp.json``       ``~/.cursor/mcp.json``
vscode          ``.vscode/mcp.json``       ``Code/User/mcp.json`` in the platform's config folder
=============== ========================== ====================================================

Reading goes through :func:`mcpmux.config.formats.normalise_document`, the same reader the loader
uses, so an imported server is exactly what mcpmux would run from that file. Writing produces the
host's shape; ``${VAR}`` references are written in the host's own spelling (``${env:VAR}`` for
Cursor and VS Code), never expanded.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcpmux.config.formats import normalise_document
from mcpmux.config.interpolate import expand
from mcpmux.config.parse import read_data
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "HOSTS",
    "Host",
    "expand_references",
    "export_servers",
    "host_files",
    "merge_into",
    "read_servers",
    "referenced_variables",
]

Scope = Literal["project", "user"]
_REFERENCE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)((?::-[^}]*)?)\}")


@dataclass(frozen=True, slots=True)
class Host:
    """One MCP host: the key its file keeps servers under and how it spells references."""

    name: str
    servers_key: str
    env_reference: str
    remote_types: tuple[str, ...]
    type_field: bool
    expands_references: bool = True
    """Whether the host itself expands references in its file (Claude Desktop does not)."""


HOSTS: dict[str, Host] = {
    "claude-code": Host("claude-code", "mcpServers", "${{{}}}", ("http", "sse"), True),
    "claude-desktop": Host("claude-desktop", "mcpServers", "${{{}}}", ("http", "sse"), True, expands_references=False),
    "cursor": Host("cursor", "mcpServers", "${{env:{}}}", ("http", "sse"), False),
    "vscode": Host("vscode", "servers", "${{env:{}}}", ("http", "sse"), True),
}


def _config_home(platform: str) -> Path:
    if platform == "win32":
        return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    if platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    value = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return Path(value) if value and Path(value).is_absolute() else Path.home() / ".config"


def host_files(host: str, *, cwd: Path | None = None, platform: str | None = None) -> dict[Scope, Path]:
    """The files of ``host`` per scope, present or not (the platform's usual locations).

    Raises:
        ConfigError: unknown host.
    """
    platform = platform or sys.platform
    cwd = cwd or Path.cwd()
    home, config = Path.home(), _config_home(platform)
    table: dict[str, dict[Scope, Path]] = {
        "claude-desktop": {"user": config / "Claude" / "claude_desktop_config.json"},
        "claude-code": {"project": cwd / ".mcp.json", "user": home / ".claude.json"},
        "cursor": {"project": cwd / ".cursor" / "mcp.json", "user": home / ".cursor" / "mcp.json"},
        "vscode": {"project": cwd / ".vscode" / "mcp.json", "user": config / "Code" / "User" / "mcp.json"},
    }
    if host not in table:
        known = ", ".join(sorted(table))
        raise ConfigError(ConfigProblem("<cli>", "", f"unknown host {host!r} (known: {known})"))
    return table[host]


def read_servers(path: Path) -> tuple[list[JSONObject], list[str]]:
    """The servers of any supported file, in mcpmux's shape, and the reader's warnings.

    References stay references: ``${env:VAR}`` becomes ``${VAR}``, nothing is expanded.

    Raises:
        ConfigError: the file is unreadable, not a configuration, or has problems.
    """
    document = normalise_document(read_data(path), str(path), path)
    if document.problems:
        raise ConfigError(document.problems)
    servers = [_plain_references(dict(raw.data)) for raw in document.servers]
    return servers, [str(w) for w in document.warnings]


def _plain_references(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)", r"${\1", value)
    if isinstance(value, list):
        return [_plain_references(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain_references(v) for k, v in value.items()}
    return value


def export_servers(servers: list[JSONObject], host: str) -> tuple[JSONObject, list[str]]:
    """``{servers_key: {name: entry}}`` for ``host``, and why any server was left out.

    Built-in servers are exported as ``mcpmux builtin KIND`` over stdio; websocket and tcp
    servers are left out (no other host speaks them).
    """
    spec = HOSTS[host]
    out: JSONObject = {}
    skipped: list[str] = []
    for server in servers:
        entry = _host_entry(server, spec)
        if entry is None:
            skipped.append(f"{server['name']}: type {server.get('type')!r} is not supported by {host}")
        else:
            out[str(server["name"])] = entry
    return {spec.servers_key: out}, skipped


def _host_entry(server: JSONObject, spec: Host) -> JSONObject | None:
    kind = server.get("type", "stdio")
    entry: JSONObject = {}
    if kind == "builtin":
        kind, server = "stdio", {"command": "mcpmux", "args": ["builtin", _builtin_kind(server)]}
    if kind == "stdio":
        if spec.type_field:
            entry["type"] = "stdio"
        entry["command"] = server["command"]
        for key in ("args", "env", "cwd"):
            if server.get(key):
                entry[key] = _host_references(server[key], spec)
    elif kind in spec.remote_types:
        if spec.type_field:
            entry["type"] = kind
        entry["url"] = _host_references(server["url"], spec)
        if server.get("headers"):
            entry["headers"] = _host_references(server["headers"], spec)
    else:
        return None
    if server.get("enabled") is False:
        entry["disabled"] = True
    return entry


def _builtin_kind(server: JSONObject) -> str:
    return str(server.get("builtin") or str(server["name"]).replace("-", "_"))


def _host_references(value: Any, spec: Host) -> Any:
    if isinstance(value, str):
        return _REFERENCE.sub(lambda m: spec.env_reference.format(m.group(1) + m.group(2)), value)
    if isinstance(value, list):
        return [_host_references(v, spec) for v in value]
    if isinstance(value, dict):
        return {k: _host_references(v, spec) for k, v in value.items()}
    return value


def referenced_variables(value: Any) -> set[str]:
    """The variables that ``${VAR}`` / ``${env:VAR}`` references anywhere in ``value`` name."""
    if isinstance(value, str):
        return {match.group(1) for match in _REFERENCE.finditer(value)}
    if isinstance(value, list):
        return set().union(*(referenced_variables(v) for v in value))
    if isinstance(value, dict):
        return set().union(*(referenced_variables(v) for v in value.values()))
    return set()


def expand_references(servers: list[JSONObject], environ: Mapping[str, str]) -> list[JSONObject]:
    """``servers`` with the references in their env, headers, args and url expanded from ``environ``.

    Raises:
        ConfigError: a referenced variable is unset (each one listed with its server and field).
    """
    problems: list[ConfigProblem] = []

    def expanded(value: Any, where: str) -> Any:
        if isinstance(value, str):
            result = expand(value, environ)
            problems.extend(ConfigProblem("<export>", where, m.reason) for m in result.missing)
            return result.value
        if isinstance(value, list):
            return [expanded(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: expanded(v, f"{where}.{k}") for k, v in value.items()}
        return value

    out = []
    for server in servers:
        fields = ("env", "headers", "args", "url")
        out.append({k: expanded(v, f"{server.get('name')}.{k}") if k in fields else v for k, v in server.items()})
    if problems:
        raise ConfigError(problems)
    return out


def merge_into(existing: Any, exported: JSONObject) -> JSONObject:
    """``exported`` merged into a host file's data: same-name servers replaced, all else kept."""
    data = dict(existing) if isinstance(existing, dict) else {}
    for key, servers in exported.items():
        current = data.get(key)
        data[key] = {**(current if isinstance(current, dict) else {}), **servers}
    return data
