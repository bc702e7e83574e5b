"""Serve a :class:`~mcpmux.testing.MockServer` on any transport, as an async context manager.

``async with serve(mock, "tcp") as served:`` yields a :class:`Served`: the ``ServerConfig`` to
give mcpmux (``served.config``), the address (``served.url``), and ways in for clients that
are not mcpmux (``served.sdk_transport()`` for the SDK's ``ClientSession`` or ``Client``).

- ``memory``: in this process over memory streams, one session per client; mcpmux has no
  in-process server type in its configuration, so hand ``served.connection_factory`` to the
  :class:`~mcpmux.manager.Manager` (:func:`mcpmux.testing.open_manager` does).
- ``stdio``: a real child process per client, ``python -m mcpmux.testing`` with the mock's JSON
  spec (or ``module="pkg.mod:attr"`` naming a mock to import); its calls come back to ``mock.calls``
  through a call log. mcpmux's stdio transport starts and reaps each child.
- ``tcp``, ``websocket``: mcpmux's own server adapters (:func:`~mcpmux.transports.tcp.serve_tcp`,
  :func:`~mcpmux.transports.websocket.serve_websocket`) on a free 127.0.0.1 port.
- ``sse``, ``http``: the SDK's SSE and Streamable HTTP servers under uvicorn on a free 127.0.0.1 port
  (:mod:`mcpmux.testing.http`).

Leaving the context stops the listener and every session.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
from mcp.shared.message import SessionMessage

from mcpmux.config.models import (
    ProtocolChoice,
    ServerConfig,
    Settings as MuxSettings,
    SseServerConfig,
    StdioServerConfig,
    StreamableHttpServerConfig,
    TcpServerConfig,
    WebSocketServerConfig,
)
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import UsageError
from mcpmux.testing.failures import Startup
from mcpmux.testing.runtime import MockRuntime
from mcpmux.testing.spec import Call, MockSpec
from mcpmux.transports.base import ReadStream, TransportStreams, WriteStream

__all__ = ["TRANSPORTS", "Served", "TransportName", "in_memory", "serve"]

TransportName = Literal["memory", "stdio", "tcp", "websocket", "sse", "http"]
TRANSPORTS: tuple[TransportName, ...] = ("memory", "stdio", "tcp", "websocket", "sse", "http")
SdkStreams = tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]
_HEADERLESS = ("memory", "stdio", "tcp")
HTTP_SHUTDOWN_S = 10.0


@dataclass
class Served:
    """A mock being served.

    Attributes:
        mock: the mock (its ``calls`` fill as clients call it).
        transport: how it is served.
        config: the ``ServerConfig`` that reaches it (for ``memory``, one that only
            :attr:`connection_factory` can open).
        url: its address for network transports, else ``None``.
        runtime: the SDK server answering in this process (``None`` for ``stdio``: a child answers).
    """

    mock: MockSpec
    transport: TransportName
    config: ServerConfig
    url: str | None = None
    runtime: MockRuntime | None = None
    _memory: Callable[[], AbstractAsyncContextManager[TransportStreams]] | None = field(default=None, repr=False)

    def open(self, settings: MuxSettings | None = None) -> AbstractAsyncContextManager[TransportStreams]:
        """mcpmux's transport to this mock (what a :class:`Connection` opens)."""
        if self._memory is not None:
            return self._memory()
        from mcpmux.transports import open_transport

        return open_transport(self.config, settings or MuxSettings())

    def connection(
        self, *, settings: MuxSettings | None = None, callbacks: ClientCallbacks | None = None, **fields: Any
    ) -> Connection:
        """mcpmux's :class:`Connection` to this mock; ``fields`` change the config (``protocol=...``)."""
        config = self.config.model_copy(update=fields) if fields else self.config
        settings = settings or MuxSettings()
        if self._memory is not None:
            return Connection(config, settings, callbacks=callbacks, transport=self._memory)
        return Connection(config, settings, callbacks=callbacks)

    def connection_factory(self, config: ServerConfig, settings: MuxSettings, callbacks: ClientCallbacks) -> Connection:
        """A :class:`~mcpmux.manager.Manager` ``connection_factory`` that opens this mock in memory."""
        return Connection(config, settings, callbacks=callbacks, transport=lambda: self.open(settings))

    @asynccontextmanager
    async def sdk_transport(self) -> AsyncIterator[SdkStreams]:
        """A transport for the official SDK's ``ClientSession(*streams)`` or ``mcp.Client(transport)``."""
        if self.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert isinstance(self.config, StdioServerConfig)
            env = {key: value.get_secret_value() for key, value in self.config.env.items()}
            params = StdioServerParameters(command=self.config.command, args=list(self.config.args), env=env)
            async with stdio_client(params) as streams:
                yield streams
        elif self.transport == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(self._url(), headers=self._headers()) as streams:
                yield streams
        elif self.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            async with (
                httpx2.AsyncClient(headers=self._headers(), timeout=30) as client,
                streamable_http_client(self._url(), http_client=client) as streams,
            ):
                yield streams[0], streams[1]
        else:
            async with self.open() as streams:
                yield streams.read, streams.write

    def _url(self) -> str:
        assert self.url is not None
        return self.url

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.mock.bearer}"} if self.mock.bearer else {}


def serve(
    mock: MockSpec,
    transport: TransportName = "memory",
    *,
    protocol: ProtocolChoice = "auto",
    module: str | None = None,
) -> AbstractAsyncContextManager[Served]:
    """Serve ``mock`` on ``transport``; the context yields the :class:`Served`.

    Args:
        mock: what to serve.
        transport: ``memory``, ``stdio``, ``tcp``, ``websocket``, ``sse`` or ``http``.
        protocol: the ``protocol`` of the yielded config (which era mcpmux opens with).
        module: for ``stdio``, ``"pkg.mod:attr"`` naming the mock (a ``MockServer``, or a function
            returning one) for the child to import, instead of the mock's JSON spec; needed when
            tools have Python handlers.

    Raises:
        UsageError: an unknown transport, a bearer token on a transport without headers, or a
            startup behaviour (``slow_start``, ``exit_on_start``) on ``sse`` or ``http``, whose
            sessions have no start to play it on.
    """
    if transport not in TRANSPORTS:
        raise UsageError(f"unknown mock transport {transport!r}", hint=f"one of: {', '.join(TRANSPORTS)}")
    if mock.bearer is not None and transport in _HEADERLESS:
        raise UsageError(
            f"mock {mock.name!r} requires a bearer token, which {transport} cannot carry",
            hint="serve it over http, sse or websocket",
        )
    if transport in ("sse", "http") and mock.startup != Startup():
        raise UsageError(
            f"mock {mock.name!r} has a startup behaviour ({mock.startup}), which {transport} cannot play",
            hint="serve it over stdio, memory, tcp or websocket",
        )
    if transport == "stdio":
        return _serve_stdio(mock, protocol, module)
    if transport == "memory":
        return _serve_memory(mock, protocol)
    return _serve_network(mock, transport, protocol)


def in_memory(mock: MockSpec, protocol: ProtocolChoice = "auto") -> Served:
    """``mock`` served in this process, without a context: serving in memory starts nothing to stop.

    For code that builds its connections without an ``async with`` (a connection factory made
    up front); ``serve(mock, "memory")`` yields the same thing.
    """
    from mcpmux.transports.inprocess import open_mcp_server

    runtime = MockRuntime(mock)

    def memory() -> AbstractAsyncContextManager[TransportStreams]:
        return open_mcp_server(runtime, name=mock.name, describe=f"in-process mock {mock.name}")

    # A config mcpmux can parse and show; opening it without the factory says what to do instead.
    hint = f"mock {mock.name!r} is served in memory: pass connection_factory=served.connection_factory"
    config = StdioServerConfig(
        name=mock.name, command=sys.executable, args=("-c", f"raise SystemExit({hint!r})"), protocol=protocol
    )
    return Served(mock, "memory", config, runtime=runtime, _memory=memory)


@asynccontextmanager
async def _serve_memory(mock: MockSpec, protocol: ProtocolChoice) -> AsyncIterator[Served]:
    yield in_memory(mock, protocol)


@asynccontextmanager
async def _serve_stdio(mock: MockSpec, protocol: ProtocolChoice, module: str | None) -> AsyncIterator[Served]:
    with tempfile.TemporaryDirectory(prefix="mcpmux-mock-") as scratch:
        calls_log = Path(scratch) / "calls.jsonl"
        calls_log.touch()
        if module is not None:
            source = ["--module", module]
        else:
            spec = Path(scratch) / "spec.json"
            spec.write_text(json.dumps(mock.to_spec()))
            source = ["--spec", str(spec)]
        # The child imports mcpmux (and a module path) from this interpreter's path.
        env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        config = StdioServerConfig(
            name=mock.name,
            command=sys.executable,
            args=("-m", "mcpmux.testing", *source, "--calls", str(calls_log)),
            env=env,
            protocol=protocol,
        )
        remove = mock.add_call_source(partial(_read_calls, calls_log))
        try:
            yield Served(mock, "stdio", config)
        finally:
            remove()
            for call in _read_calls(calls_log):
                mock.record(call)


def _read_calls(path: Path) -> list[Call]:
    calls = []
    for line in path.read_text().splitlines():
        if line.strip():
            calls.append(Call(**json.loads(line)))
    return calls


@asynccontextmanager
async def _serve_network(mock: MockSpec, transport: TransportName, protocol: ProtocolChoice) -> AsyncIterator[Served]:
    from mcpmux.testing.http import serve_http
    from mcpmux.transports.tcp import serve_tcp
    from mcpmux.transports.websocket import serve_websocket

    runtime = MockRuntime(mock)
    stop = anyio.Event()
    # The body's own error is raised as itself after the servers stopped, not wrapped in the
    # task group's ExceptionGroup: ``pytest.raises(ServerExited)`` around ``serve()`` works.
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:
        if transport == "tcp":
            port = await tg.start(serve_tcp, runtime, "127.0.0.1", 0)
            url = f"tcp://127.0.0.1:{port}"
            config: ServerConfig = TcpServerConfig(name=mock.name, url=url, protocol=protocol)
        elif transport == "websocket":
            port = await tg.start(partial(serve_websocket, runtime, "127.0.0.1", 0, admit=_websocket_admission(mock)))
            url = f"ws://127.0.0.1:{port}"
            config = WebSocketServerConfig(name=mock.name, url=url, headers=_auth(mock), protocol=protocol)
        else:
            port = await tg.start(serve_http, runtime, stop)
            if transport == "sse":
                url = f"http://127.0.0.1:{port}/sse"
                config = SseServerConfig(name=mock.name, url=url, headers=_auth(mock), protocol=protocol)
            else:
                url = f"http://127.0.0.1:{port}/mcp"
                config = StreamableHttpServerConfig(name=mock.name, url=url, headers=_auth(mock), protocol=protocol)
        try:
            yield Served(mock, transport, config, url=url, runtime=runtime)
        except Exception as exc:  # noqa: BLE001 - raised below, once the servers stopped
            failure = exc
        finally:
            stop.set()
            if transport in ("tcp", "websocket"):
                tg.cancel_scope.cancel()
            else:
                # uvicorn shuts down on its own (lifespan included); cancelled only if it overstays.
                tg.cancel_scope.deadline = anyio.current_time() + HTTP_SHUTDOWN_S
    if failure is not None:
        raise failure


def _auth(mock: MockSpec) -> Any:
    return {"Authorization": f"Bearer {mock.bearer}"} if mock.bearer else {}


def _websocket_admission(mock: MockSpec) -> Any:
    from mcpmux.transports.websocket import Handshake

    if mock.bearer is None:
        return None
    expected = f"Bearer {mock.bearer}"

    async def admit(headers: Any) -> Handshake:
        if headers.get("authorization") == expected:
            return Handshake()
        return Handshake(refuse_status=401, reason="a bearer token is required")

    return admit
