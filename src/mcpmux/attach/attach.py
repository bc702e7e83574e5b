"""The daemon's first message: which server a client wants, as the client's configuration resolved it.

A connection to the daemon starts with one JSON-RPC request, then speaks MCP (newline JSON-RPC, the
gateway's stream framing)::

    -> {"jsonrpc": "2.0", "id": "mcpmux", "method": "mcpmux/attach",
        "params": {"origin": "...", "server": {...}, "settings": {...}, "security": {...}, "secrets": [...]}}
    <- {"jsonrpc": "2.0", "id": "mcpmux", "result": {"daemon_pid": 12, "server_pid": 34, "instance": "..."}}
    ... MCP: initialize, tools/list, tools/call ...

The entry travels resolved (``${VAR}`` expanded with the client's environment, from the client's
files and working directory), so the daemon runs what the client would have run; its fingerprint
(SHA-256 of the canonical JSON of entry, settings, security and the requests the client
can answer) picks the warm instance, and a
changed entry gets a new one. ``mcpmux/attach-all`` (:class:`AttachAll`, ``mcpmux connect --all``)
sends the client's whole configuration instead: the daemon then serves every configured server as
one MCP server for that connection (the gateway's names), its stdio servers from the warm pool.
``mcpmux/status`` and ``mcpmux/stop`` are the other two requests a connection may start with (one
answer, then the connection closes).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from pydantic import SecretStr

from mcpmux.attach.wire import (
    ATTACH,
    ATTACH_ALL,
    ATTACH_KNOWN,
    MAX_ATTACH_BYTES,
    REQUEST_ID,
    STATUS,
    STOP,
    TOOLS,
    error_reply,
    request_line,
    result_reply,
)
from mcpmux.config.models import Config, DaemonMode, SecurityConfig, ServerConfig, Settings, StdioServerConfig
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "ATTACH",
    "ATTACH_ALL",
    "ATTACH_KNOWN",
    "MAX_ATTACH_BYTES",
    "REQUEST_ID",
    "STATUS",
    "STOP",
    "TOOLS",
    "Attach",
    "AttachAll",
    "daemon_mode",
    "error_reply",
    "origin_of",
    "request_line",
    "result_reply",
    "servable",
]

_MODES: tuple[DaemonMode, ...] = ("auto", "on", "off")


@dataclass(frozen=True, slots=True)
class Attach:
    """A client's request for one server, as its configuration resolved it."""

    origin: str
    server: ServerConfig
    settings: Settings
    security: SecurityConfig
    client: str = "client"
    answers: tuple[str, ...] = ("elicitation", "sampling")
    """The server requests the client can answer (its MCP capabilities): the instance declares
    only these upstream, so a server shows a client what it would show it directly."""

    def params(self) -> JSONObject:
        """The request's ``params`` (secrets revealed: they travel only over the user's own socket)."""
        return {
            "origin": self.origin,
            "client": self.client,
            "server": _plain(self.server.model_dump(by_alias=True)),
            "settings": _plain(self.settings.model_dump(by_alias=True)),
            "security": _plain(self.security.model_dump(by_alias=True)),
            "secrets": sorted(self.server.secret_values),
            "answers": sorted(self.answers),
        }

    @property
    def fingerprint(self) -> str:
        """SHA-256 over the canonical JSON of the entry, the settings and the security section."""
        params = self.params()
        canonical = {k: params[k] for k in ("server", "settings", "security", "answers")}
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Attach:
        """The request behind ``params``.

        Only stdio entries are served: the daemon exists to share child processes.

        Raises:
            ValueError: the entry, settings or security section is invalid (pydantic's error), or not stdio.
            KeyError: no ``server``.
        """
        secrets = frozenset(str(s) for s in params.get("secrets", ()))
        server = StdioServerConfig.model_validate(params["server"])
        return cls(
            origin=str(params.get("origin", "")),
            client=str(params.get("client", "client"))[:64],
            server=server.model_copy(update={"secret_values": secrets}),
            settings=Settings(**params.get("settings", {})),
            security=SecurityConfig(**params.get("security", {})),
            answers=tuple(sorted({str(a) for a in params.get("answers", ())} & {"elicitation", "sampling"})),
        )


@dataclass(frozen=True, slots=True)
class AttachAll:
    """A client's request for every server of its configuration as one MCP server (``connect --all``)."""

    origin: str
    config: Config
    client: str = "connect"

    def params(self) -> JSONObject:
        """The request's ``params`` (secrets revealed: they travel only over the user's own socket)."""
        config = self.config
        return {
            "origin": self.origin,
            "client": self.client,
            "config": _plain(config.model_dump(by_alias=True)),
            "secrets": sorted(config.secret_values),
            "server_secrets": {s.name: sorted(s.secret_values) for s in config.servers if s.secret_values},
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> AttachAll:
        """The request behind ``params``.

        Raises:
            ValueError: the configuration is invalid (pydantic's error).
            KeyError: no ``config``.
            TypeError: ``server_secrets`` is not a mapping of lists.
        """
        config = Config.model_validate(params["config"])
        held = params.get("server_secrets") or {}
        if not isinstance(held, Mapping):
            raise TypeError("server_secrets must map server names to lists of values")
        servers = tuple(
            s.model_copy(update={"secret_values": frozenset(str(v) for v in held.get(s.name, ()))})
            for s in config.servers
        )
        secrets = frozenset(str(s) for s in params.get("secrets", ()))
        config = config.model_copy(update={"servers": servers, "secret_values": secrets})
        return cls(
            origin=str(params.get("origin", "")), config=config, client=str(params.get("client", "connect"))[:64]
        )


def daemon_mode(config: Config, override: str | None = None) -> DaemonMode:
    """The mode in force: ``override`` (the command line), else ``MCPMUX_DAEMON``, else the settings."""
    for candidate in (override, os.environ.get("MCPMUX_DAEMON")):
        if candidate in _MODES:
            return candidate
    return config.settings.daemon


def servable(server: ServerConfig) -> bool:
    """Whether ``server`` goes through the daemon: a resolved stdio entry that may be kept and shared.

    ``share: per-call`` and ``lifecycle: transient`` entries are never kept: the command starts them.
    """
    share = getattr(server, "share", "per-call")
    kept = share != "per-call" and getattr(server, "lifecycle", "singleton") != "transient"
    return server.type == "stdio" and kept and server.unresolved_error() is None


def origin_of(config: Config) -> str:
    """Which client configuration an attach comes from: its last file and the working directory."""
    return f"{config.sources[-1] if config.sources else ''}@{Path.cwd()}"


def _plain(value: Any) -> Any:
    """``value`` as JSON data, secrets revealed."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, PurePath):
        return str(value)
    return value
