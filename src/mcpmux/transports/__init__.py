"""Transports: open a pair of SDK message streams for one configured server.

:func:`open_transport` picks the transport by the server's ``type`` through :data:`OPENERS`; a
transport's module (and its optional dependencies) is imported only when that type is used, and so
are the names re-exported here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from mcpmux.config.models import ServerConfig, Settings
from mcpmux.errors import MCPMuxError
from mcpmux.transports.base import TransportStreams

if TYPE_CHECKING:
    from mcpmux.transports.framing import LineFramer
    from mcpmux.transports.http import open_sse, open_streamable_http
    from mcpmux.transports.stdio import INHERITED_ENV_PREFIXES, INHERITED_ENV_VARS, child_environment, open_stdio
    from mcpmux.transports.tcp import open_tcp, serve_tcp
    from mcpmux.transports.websocket import open_websocket, serve_websocket

__all__ = [
    "INHERITED_ENV_PREFIXES",
    "INHERITED_ENV_VARS",
    "OPENERS",
    "LineFramer",
    "TransportStreams",
    "child_environment",
    "open_sse",
    "open_stdio",
    "open_streamable_http",
    "open_tcp",
    "open_transport",
    "open_websocket",
    "serve_tcp",
    "serve_websocket",
]

Opener = Callable[[Any, Settings], AbstractAsyncContextManager[TransportStreams]]

OPENERS: dict[str, tuple[str, str]] = {
    "stdio": ("mcpmux.transports.stdio", "open_stdio"),
    "tcp": ("mcpmux.transports.tcp", "open_tcp"),
    "websocket": ("mcpmux.transports.websocket", "open_websocket"),
    "sse": ("mcpmux.transports.http", "open_sse"),
    "http": ("mcpmux.transports.http", "open_streamable_http"),
    "builtin": ("mcpmux.transports.inprocess", "open_builtin"),
    "openapi": ("mcpmux.transports.openapi", "open_openapi"),
}
"""``type`` of a server entry -> (module, function) that opens it."""

_LAZY: dict[str, str] = {
    "INHERITED_ENV_PREFIXES": "mcpmux.transports.stdio",
    "INHERITED_ENV_VARS": "mcpmux.transports.stdio",
    "LineFramer": "mcpmux.transports.framing",
    "child_environment": "mcpmux.transports.stdio",
    "open_sse": "mcpmux.transports.http",
    "open_stdio": "mcpmux.transports.stdio",
    "open_streamable_http": "mcpmux.transports.http",
    "open_tcp": "mcpmux.transports.tcp",
    "open_websocket": "mcpmux.transports.websocket",
    "serve_tcp": "mcpmux.transports.tcp",
    "serve_websocket": "mcpmux.transports.websocket",
}


def open_transport(server: ServerConfig, settings: Settings) -> AbstractAsyncContextManager[TransportStreams]:
    """The transport of ``server``: ``async with open_transport(server, settings) as streams: ...``.

    Raises (on entering the context):
        CommandNotFound: a stdio server's command is not on its PATH.
        ConnectFailed, AuthRequired, HTTPStatusError: a network server could not be reached.
        TransportError: any other failure to open the transport.
        UnresolvedVariable: the server's configuration uses an unset ``${VAR}``; nothing is started.
    """
    unresolved = server.unresolved_error()
    if unresolved is not None:
        return _Refused(unresolved)
    module, function = OPENERS[server.type]
    opener: Opener = getattr(importlib.import_module(module), function)
    return opener(server, settings)


class _Refused(AbstractAsyncContextManager[TransportStreams]):
    """The transport of a server that must not start: entering it raises the reason."""

    def __init__(self, error: MCPMuxError) -> None:
        self._error = error

    async def __aenter__(self) -> TransportStreams:
        raise self._error

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpmux.transports' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
