"""A mock served over Streamable HTTP (``/mcp``) and legacy SSE (``/sse`` + ``/messages/``) on loopback.

The SDK serves both eras at ``/mcp``; :class:`MockGate` applies the mock's bearer token, era,
protocol version drift and garbage answers to each request (a Streamable HTTP session has no
stream of its own to put :class:`~mcpmux.testing.runtime.EraGate` on; SSE sessions go through
:meth:`MockRuntime.run` and get it there). A :class:`~mcpmux.testing.failures.Crash` restarts the
whole HTTP server on the same port, so every connection drops and every session is forgotten.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import uvicorn
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpmux._private.uvicorn import QuietServer
from mcpmux.testing.failures import Crash, GarbageOutput
from mcpmux.testing.runtime import EraGate, MockRuntime

__all__ = ["MockGate", "serve_http"]

logger = logging.getLogger(__name__)

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def build_app(runtime: MockRuntime) -> MockGate:
    """The mock's ASGI application: ``/mcp`` (both eras), ``/sse`` and ``/messages/`` (legacy SSE)."""
    security = TransportSecuritySettings(allowed_hosts=LOOPBACK_HOSTS, allowed_origins=LOOPBACK_ORIGINS)
    # SSE answers, as servers in the wild give them: a call's progress and its server->client requests
    # (sampling, elicitation) travel on the call's own response stream. JSON answers have no room for
    # them, and the SDK refuses such requests ("no back-channel").
    sessions = StreamableHTTPSessionManager(runtime, json_response=False, security_settings=security)
    sse = SseServerTransport("/messages/", security_settings=security)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sessions.run():
            yield

    routes = [
        Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions)),
        Route("/sse", endpoint=_SseStream(runtime, sse), methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
    ]
    return MockGate(Starlette(routes=routes, lifespan=lifespan), runtime)


class _SseStream:
    """``GET /sse`` as an ASGI app (Starlette runs a non-function endpoint as one).

    The SSE transport writes its response to the ASGI ``send`` itself; a request endpoint would
    have to dig ``send`` out of Starlette's ``Request`` (a private attribute).
    """

    def __init__(self, runtime: MockRuntime, sse: SseServerTransport) -> None:
        self.runtime, self.sse = runtime, sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.sse.connect_sse(scope, receive, send) as (read, write):
            await self.runtime.run(read, write, self.runtime.create_initialization_options())


class MockGate:
    """Bearer token, era, drift and garbage for each HTTP request of a mock (pure ASGI)."""

    def __init__(self, app: ASGIApp, runtime: MockRuntime) -> None:
        self.app, self.runtime = app, runtime
        self.gate = EraGate(runtime)
        self._inflight: set[anyio.CancelScope] = set()

    def crash(self) -> None:
        """Cut every request in flight: each client gets a response that breaks off mid-body."""
        for scope in list(self._inflight):
            scope.cancel()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            await _plain(send, 401, b"a bearer token is required", [(b"www-authenticate", b"Bearer")])
            return
        if scope["method"] != "POST" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        message = _parse(body)
        refused = self.gate.refusal(message) if message is not None else None
        if refused is not None:
            await _json(send, refused.model_dump(mode="json", by_alias=True, exclude_unset=True))
            return
        replay = _replaying(body, receive)
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        with anyio.CancelScope() as inflight:
            self._inflight.add(inflight)
            try:
                if message is None or not self._may_rewrite(message):
                    await self.app(scope, replay, tracking)
                else:
                    await self._rewritten(scope, replay, tracking)
            finally:
                self._inflight.discard(inflight)
        if inflight.cancelled_caught:
            await _break_off(send, started)

    def _authorized(self, scope: Scope) -> bool:
        token = self.runtime.mock.bearer
        if token is None:
            return True
        headers = dict(scope["headers"])
        return bool(headers.get(b"authorization", b"").decode("latin-1") == f"Bearer {token}")

    def _may_rewrite(self, message: types.JSONRPCMessage) -> bool:
        if not isinstance(message, types.JSONRPCRequest):
            return False
        if message.method == "initialize":
            return self.runtime.mock.answered_version is not None
        mock = self.runtime.mock
        failures = [*mock.failures, *(f for tool in mock.tools.values() for f in tool.failures)]
        return message.method == "tools/call" and any(isinstance(f, GarbageOutput) for f in failures)

    async def _rewritten(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request, holding its answer (JSON, or the events of an SSE stream) back to rewrite it."""
        start: Message | None = None
        chunks: list[bytes] = []

        async def hold(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await self._send_rewritten(start, b"".join(chunks), send)

        await self.app(scope, receive, hold)

    async def _send_rewritten(self, start: Message, body: bytes, send: Send) -> None:
        headers = dict(start["headers"])
        content_type = headers.get(b"content-type", b"")
        if content_type.startswith(b"application/json"):
            body = self._rewrite_json(body)
        elif content_type.startswith(b"text/event-stream"):
            lines = body.split(b"\n")
            body = b"\n".join(b"data: " + self._rewrite_json(x[6:]) if x.startswith(b"data: ") else x for x in lines)
        headers[b"content-length"] = str(len(body)).encode()
        await send({**start, "headers": list(headers.items())})
        await send({"type": "http.response.body", "body": body})

    def _rewrite_json(self, body: bytes) -> bytes:
        parsed = _parse(body)
        if parsed is None:
            return body
        return json.dumps(self.gate.rewrite(parsed).model_dump(mode="json", by_alias=True)).encode()


async def _break_off(send: Send, started: bool) -> None:
    """End a response the way a dying server does: a promised body that never arrives (uvicorn closes)."""
    if not started:
        head = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": b'{"jsonrpc": "2.0", ', "more_body": True})


def _parse(body: bytes) -> types.JSONRPCMessage | None:
    try:
        return types.jsonrpc_message_adapter.validate_json(body)
    except ValidationError:
        return None  # a batch or garbage: the SDK answers it


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _plain(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    head = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": body})


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(
    runtime: MockRuntime, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``runtime`` on a free loopback port (reported through ``task_status``) until ``stop`` is set.

    A crash (``runtime``'s crash hook is set here) stops the server at once, dropping every
    connection, and serves again on the same port with fresh sessions.
    """
    first = _bind(0)
    port = first.getsockname()[1]
    sock: socket.socket | None = first
    task_status.started(port)
    while not stop.is_set():
        sock = sock or _bind(port)
        crashed = anyio.Event()
        app = build_app(runtime)

        async def crash(failure: Crash, app: MockGate = app, crashed: anyio.Event = crashed) -> None:
            app.crash()
            await runtime.drop_sessions(failure)
            crashed.set()

        runtime.set_crash_hook(crash)
        await _serve_once(app, sock, stop, crashed)  # closes sock
        sock = None
        if crashed.is_set():
            logger.info("mock %r restarts on port %d after a crash", runtime.mock.name, port)


async def _serve_once(app: ASGIApp, sock: socket.socket, stop: anyio.Event, crashed: anyio.Event) -> None:
    """One life of the HTTP server: until ``stop`` (graceful) or ``crashed`` (every connection dropped)."""
    config = uvicorn.Config(
        app, ws="none", lifespan="on", log_level="critical", access_log=False, timeout_graceful_shutdown=1
    )
    server = QuietServer(config)

    async def exit_on(event: anyio.Event, force: bool) -> None:
        await event.wait()
        server.should_exit = True
        server.force_exit = force

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(exit_on, stop, False)
            tg.start_soon(exit_on, crashed, True)
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()
    finally:
        sock.close()
