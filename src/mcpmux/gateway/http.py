"""The gateway over HTTP: Streamable HTTP at ``/mcp``, legacy SSE at ``/sse``, ``/healthz``, ``/metrics``.

Each configured toolset is served beside it at ``/mcp/NAME`` (and ``/sse/NAME`` with SSE), by a
gateway of its own; an unknown toolset is a 404 naming the known ones.

The SDK's session manager serves both eras at ``/mcp`` (a 2025-11-25 client opens a session with
``initialize``; a 2026-07-28 client sends self-contained requests). Everything sits behind
:class:`~mcpmux.web.security.SecurityMiddleware`, and uvicorn runs with the header deadline
of :mod:`mcpmux.web.slowloris`. Session ids are 192 random bits, bound to the token that
opened the session; a replica (:mod:`mcpmux.serve.cluster`) puts its id in front, and forwards
requests naming another replica there.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
import uvicorn
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpmux._private.mcp_sdk import SessionManager
from mcpmux._private.uvicorn import QuietServer
from mcpmux.gateway.metrics import CONTENT_TYPE
from mcpmux.gateway.responses import DeferredTransport
from mcpmux.gateway.server import Gateway
from mcpmux.web.security import ANONYMOUS, HttpSecurity, SecurityMiddleware
from mcpmux.web.slowloris import DEFAULT_HEADER_TIMEOUT_S, protocol_with_deadline

__all__ = ["HttpOptions", "Replicas", "build_app", "serve_http"]


class Replicas(Protocol):
    """What the gateway's HTTP app needs of the replicas it is one of (:class:`mcpmux.serve.cluster.Cluster`)."""

    def session_id(self) -> str:
        """A new session's id, this replica's own id in front."""
        ...

    def to_json(self) -> dict[str, Any]:
        """This replica and its peers, for ``/healthz``, ``/metrics`` and ``/api/replicas``."""
        ...

    def forwarding(self, app: ASGIApp) -> ASGIApp:
        """``app`` behind the forwarder that sends a peer's sessions to that peer."""
        ...


logger = logging.getLogger(__name__)

SESSION_ID_BYTES = 24
KEEP_ALIVE_TIMEOUT_S = 5


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How the HTTP face listens and what it accepts.

    ``json_response`` answers each POST with one JSON body instead of an SSE stream: cheaper, but
    progress notifications, upstream logs and relayed sampling or elicitation cannot reach the
    client during that call.
    """

    host: str = "127.0.0.1"
    port: int = 0
    security: HttpSecurity = field(default_factory=HttpSecurity)
    sse: bool = False
    json_response: bool = False
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    shutdown_timeout_s: int = 2
    extra: ASGIApp | None = None
    """An app for every other path, behind the same rules (the REST API at ``/api``)."""
    cluster: Replicas | None = None
    """This gateway as one replica of several (``mcpmux serve --replica-id``); ``None``: alone."""


def _session_id() -> str:
    return secrets.token_hex(SESSION_ID_BYTES)


def _new_transport(
    sessions: StreamableHTTPSessionManager, new_id: Callable[[], str] = _session_id
) -> StreamableHTTPServerTransport:
    """A new session's transport: a longer session id, and deferred responses.

    The SDK keys sessions with ``uuid4().hex`` (122 random bits); the gateway wants at least 128,
    so sessions are keyed with :func:`secrets.token_hex` (``new_id``: a replica's id in front). Each
    session's transport is a :class:`DeferredTransport`, which answers a request with one JSON body
    unless it has to stream.
    """
    return DeferredTransport(
        mcp_session_id=new_id(),
        is_json_response_enabled=sessions.json_response,
        event_store=sessions.event_store,
        security_settings=sessions.security_settings,
        retry_interval=sessions.retry_interval,
        idle_timeout=sessions.session_idle_timeout,
    )


def build_app(gateway: Gateway, options: HttpOptions, toolsets: Mapping[str, Gateway] | None = None) -> ASGIApp:
    """The gateway's ASGI application (lifespan included); ``toolsets`` are served at ``/mcp/NAME``."""
    # Host and Origin are checked by our middleware; the SDK repeats the check as a second line.
    transport_security = TransportSecuritySettings(
        allowed_hosts=list(options.security.allowed_hosts), allowed_origins=list(options.security.allowed_origins)
    )

    cluster = options.cluster
    new_transport = _new_transport if cluster is None else lambda m: _new_transport(m, cluster.session_id)

    def session_manager(served: Gateway) -> SessionManager:
        return SessionManager(
            served.server,
            new_transport=new_transport,
            security_settings=transport_security,
            max_request_body_size=options.security.max_body_bytes,
            json_response=options.json_response,
        )

    sessions = session_manager(gateway)
    toolset_sessions = {name: session_manager(served) for name, served in (toolsets or {}).items()}
    mcp_app = StreamableHTTPASGIApp(sessions)
    routes: list[Route | Mount] = [
        Route("/mcp", endpoint=mcp_app),
        Route("/healthz", endpoint=_healthz(gateway, cluster)),
        Route("/metrics", endpoint=_metrics(gateway, cluster)),
    ]
    if options.sse:
        max_body = options.security.max_body_bytes
        routes += _sse_routes(gateway, transport_security, max_body)
        for name, served in (toolsets or {}).items():
            routes += _sse_routes(served, transport_security, max_body, f"/{name}")
    if cluster is not None:
        routes.append(Route("/api/replicas", endpoint=_replicas(cluster)))
    if options.extra is not None:
        routes.append(Mount("/", app=options.extra))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for manager in (sessions, *toolset_sessions.values()):
                await stack.enter_async_context(manager.run())
            yield

    rest = Starlette(routes=routes, lifespan=lifespan)
    app: ASGIApp = _Shortcut("/mcp", sessions, rest, toolset_sessions)
    if cluster is not None:
        app = cluster.forwarding(app)
    return SecurityMiddleware(app, options.security)


class _Shortcut:
    """Requests for ``path`` straight to ``sessions``, ``path/NAME`` to toolset ``NAME``'s, everything else
    (lifespan included) to ``rest``.

    ``/mcp`` carries every call; Starlette's router and its two exception middlewares are three
    more layers per call there and add nothing (the SDK answers its own errors). A POST of an open
    session goes straight to its transport (:meth:`SessionManager.serve_open_session`: the body was
    capped by the security middleware in front, with the sessions' own limit).
    """

    def __init__(
        self, path: str, sessions: SessionManager, rest: ASGIApp, toolsets: Mapping[str, SessionManager] | None = None
    ) -> None:
        self.path, self.sessions, self.rest = path, sessions, rest
        self.prefix, self.toolsets = path + "/", dict(toolsets or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.rest(scope, receive, send)
            return
        path: str = scope["path"]
        if path == self.path:
            sessions: SessionManager | None = self.sessions
        elif path.startswith(self.prefix):
            sessions = self.toolsets.get(path.removeprefix(self.prefix).rstrip("/"))
            if sessions is None:
                await self._unknown(path.removeprefix(self.prefix).rstrip("/"))(scope, receive, send)
                return
        else:
            sessions = None
        if sessions is None:
            await self.rest(scope, receive, send)
        elif not await sessions.serve_open_session(scope, receive, send):
            await sessions.handle_request(scope, receive, send)

    def _unknown(self, name: str) -> ASGIApp:
        known = ", ".join(f"{self.prefix}{n}" for n in sorted(self.toolsets)) or "none (no toolsets are configured)"
        return PlainTextResponse(f"No toolset {name!r} here; toolsets served: {known}", status_code=404)


def _healthz(gateway: Gateway, cluster: Replicas | None) -> Any:
    async def healthz(request: Request) -> Response:
        ok = not gateway.draining
        status = 200 if ok else 503
        if request.scope.get(ANONYMOUS):
            # Tokens are required and none was given: say whether we are up, not what runs here.
            return PlainTextResponse("ok" if ok else "draining", status_code=status)
        states = {s.name: s.state.value for s in gateway.guard.status()}
        body: dict[str, Any] = {"ok": ok, "servers": states}
        if cluster is not None:
            body["replica"] = cluster.to_json()
        return JSONResponse(body, status_code=status)

    return healthz


def _replicas(cluster: Replicas) -> Any:
    async def replicas(request: Request) -> Response:
        return JSONResponse(cluster.to_json())

    return replicas


def _metrics(gateway: Gateway, cluster: Replicas | None) -> Any:
    async def metrics(request: Request) -> Response:
        body = gateway.metrics.render(gateway.guard.status(), None if cluster is None else cluster.to_json())
        return PlainTextResponse(body, headers={"Content-Type": CONTENT_TYPE})

    return metrics


def _sse_routes(
    gateway: Gateway, security: TransportSecuritySettings, max_body: int, suffix: str = ""
) -> list[Route | Mount]:
    """``GET /sse`` and ``/messages/``; for a toolset (``suffix`` ``/NAME``): ``/sse/NAME``, ``/sse/NAME/messages/``."""
    messages = f"/sse{suffix}/messages/" if suffix else "/messages/"
    sse = SseServerTransport(messages, security_settings=security, max_request_body_size=max_body)
    stream = _SseStream(gateway, sse)
    return [Route(f"/sse{suffix}", endpoint=stream, methods=["GET"]), Mount(messages, app=sse.handle_post_message)]


class _SseStream:
    """``GET /sse`` as an ASGI app (Starlette runs a non-function endpoint as one).

    The SSE transport writes its response to the ASGI ``send`` itself; a request endpoint would
    have to dig ``send`` out of Starlette's ``Request`` (a private attribute).
    """

    def __init__(self, gateway: Gateway, sse: SseServerTransport) -> None:
        self.gateway, self.sse = gateway, sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = self.gateway.server
        async with self.sse.connect_sse(scope, receive, send) as (read, write):
            await server.run(read, write, server.create_initialization_options())


async def serve_http(
    gateway: Gateway,
    options: HttpOptions,
    stop: anyio.Event,
    *,
    toolsets: Mapping[str, Gateway] | None = None,
    task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``gateway`` over HTTP until ``stop`` is set; ``task_status`` reports the bound port.

    Once ``stop`` is set uvicorn stops accepting, lets open responses finish for
    ``options.shutdown_timeout_s``, closes the rest and returns.
    """
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets whose proto says TCP, and
    # without it Nagle plus delayed ACKs cost ~40 ms per request/response pair.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    sock.listen(128)
    sock.setblocking(False)
    config = uvicorn.Config(
        build_app(gateway, options, toolsets),
        http=protocol_with_deadline(options.header_timeout_s),
        ws="none",
        lifespan="on",
        log_level="warning",
        access_log=False,
        # X-Forwarded-* would let any client claim another address in our logs; the gateway is
        # not meant to sit behind a proxy that it trusts by default.
        proxy_headers=False,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S,
        timeout_graceful_shutdown=options.shutdown_timeout_s,
    )
    server = QuietServer(config)

    async def exit_on_stop() -> None:
        await stop.wait()
        server.should_exit = True

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(exit_on_stop)
            task_status.started(sock.getsockname()[1])
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()
    finally:
        sock.close()
