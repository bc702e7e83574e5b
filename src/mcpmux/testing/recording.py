"""Record a real server's session as JSON lines, for :meth:`MockServer.replay <mcpmux.testing.MockServer.replay>`.

:class:`Recorder` taps the transport of an upstream connection (the gateway's, in ``mcpmux
record``): every request mcpmux sends and the answer the server gives becomes one ``exchange``
line, in the server's own names, after a ``session`` line naming the server. Secrets are
redacted before anything is written: the values of the server's configured ``env`` and
``headers`` and of interpolated ``${VAR}`` s, prefixed tokens (``ghp_...``) anywhere, and
secret-named argument keys (``token``, ``password``, ...) of requests. A redacted argument no
longer matches strictly: replay such a recording with ``match="lenient"``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from mcpmux.config.display import redact
from mcpmux.config.models import NetworkServerConfig, ServerConfig, Settings, StdioServerConfig
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.policy.audit import redact_arguments
from mcpmux.transports.base import ReadStream, TransportStreams, WriteStream

__all__ = ["Recorder", "server_secrets"]


def server_secrets(server: ServerConfig) -> frozenset[str]:
    """The values of ``server`` that must never reach a recording."""
    values = set(server.secret_values)
    if isinstance(server, StdioServerConfig):
        values.update(v.get_secret_value() for v in server.env.values())
    if isinstance(server, NetworkServerConfig):
        values.update(v.get_secret_value() for v in server.headers.values())
        values.update(v.split(" ", 1)[1] for v in list(values) if v.lower().startswith("bearer "))
    return frozenset(v for v in values if len(v) >= 4)


class Recorder:
    """Writes the session of one server to ``path`` (JSON lines, flushed per exchange).

    Use :meth:`connection_factory` as a :class:`~mcpmux.manager.Manager`'s ``connection_factory``.
    """

    def __init__(self, path: Path, server: ServerConfig) -> None:
        self.path, self.server = path, server
        self._secrets = server_secrets(server)
        self._lock = threading.Lock()
        self._pending: dict[types.RequestId, tuple[str, dict[str, Any]]] = {}
        self.exchanges = 0
        path.write_text(json.dumps({"type": "session", "server": server.name, "recorded_at": time.time()}) + "\n")

    def connection_factory(self, config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        """A connection whose transport is tapped when it is the recorded server's."""
        if config.name != self.server.name:
            return Connection(config, settings, callbacks=callbacks)
        return Connection(config, settings, callbacks=callbacks, transport=lambda: self.tap(config, settings))

    @asynccontextmanager
    async def tap(self, config: ServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
        """The server's transport, with every request and answer written down."""
        from mcpmux.transports import open_transport

        opened: AbstractAsyncContextManager[TransportStreams] = open_transport(config, settings)
        async with opened as streams:
            streams.read = _TappedRead(streams.read, self)
            streams.write = _TappedWrite(streams.write, self)
            # The lean path's requests and answers pass the streams by (transports.direct): a
            # recording must see every exchange, so this connection keeps the SDK's path.
            streams.direct = None
            yield streams

    def sent(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            params = message.params or {}
            if message.method == "tools/call":
                params = {**params, "arguments": redact_arguments(params.get("arguments") or {}, self._secrets)}
            self._pending[message.id] = (message.method, self._clean(params))

    def received(self, message: types.JSONRPCMessage) -> None:
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            return
        asked = self._pending.pop(message.id, None) if message.id is not None else None
        if asked is None:
            return
        method, params = asked
        line: dict[str, Any] = {"type": "exchange", "method": method, "params": params}
        if isinstance(message, types.JSONRPCResponse):
            line["result"] = self._clean(message.result)
        else:
            line["error"] = self._clean(message.error.model_dump(mode="json", exclude_none=True))
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.exchanges += 1

    def _clean(self, value: Any) -> Any:
        return _redact_strings(value, self._secrets)


def _redact_strings(value: Any, secrets: Iterable[str]) -> Any:
    if isinstance(value, dict):
        return {k: _redact_strings(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_strings(v, secrets) for v in value]
    if isinstance(value, str):
        return redact(value, secrets)
    return value


class _TappedWrite:
    def __init__(self, inner: WriteStream[SessionMessage], recorder: Recorder) -> None:
        self.inner, self.recorder = inner, recorder

    async def send(self, item: SessionMessage, /) -> None:
        self.recorder.sent(item.message)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _TappedWrite:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class _TappedRead:
    def __init__(self, inner: ReadStream[SessionMessage | Exception], recorder: Recorder) -> None:
        self.inner, self.recorder = inner, recorder

    async def receive(self) -> SessionMessage | Exception:
        item = await self.inner.receive()
        if isinstance(item, SessionMessage):
            self.recorder.received(item.message)
        return item

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> _TappedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError) as exc:
            raise StopAsyncIteration from exc

    async def __aenter__(self) -> _TappedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None
