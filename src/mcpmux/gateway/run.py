"""``mcpmux serve`` as a library call: the manager, the guard, the gateway and its listeners.

Shutdown (SIGTERM, SIGINT, or the end of stdin in ``--stdio`` mode): new calls are refused,
calls in flight get ``drain_timeout_s`` to finish, the listeners close, and only then does the
manager stop the upstream servers. Only configured servers are ever started: nothing a network
client sends can make the gateway spawn a process.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc
from mcp.server.stdio import stdio_server

from mcpmux.config.models import Config
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.gateway.caller import stdio_channel
from mcpmux.gateway.downstream import Downstream
from mcpmux.gateway.http import HttpOptions, serve_http
from mcpmux.gateway.security import HttpSecurity, is_loopback
from mcpmux.gateway.server import Gateway
from mcpmux.gateway.tokens import TokenStore
from mcpmux.manager import Manager
from mcpmux.naming import DEFAULT_SEPARATOR
from mcpmux.policy import Guard, StateStore
from mcpmux.transports.tcp import serve_tcp
from mcpmux.transports.websocket import serve_websocket

__all__ = ["DEFAULT_DRAIN_TIMEOUT_S", "ServeOptions", "http_security", "serve"]

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_S = 10.0
NO_AUTH_HINT = "create a token first: mcpmux token create NAME (clients send it as 'Authorization: Bearer TOKEN')"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Which faces to serve and how to stop."""

    stdio: bool = False
    http: HttpOptions | None = None
    tcp: tuple[str, int] | None = None
    ws: tuple[str, int] | None = None
    separator: str = DEFAULT_SEPARATOR
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S


def http_security(
    host: str,
    tokens: TokenStore,
    *,
    require_auth: bool = False,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_body_bytes: int | None = None,
) -> HttpSecurity:
    """The HTTP rules for binding ``host``: tokens are required off loopback, or when any exist.

    Raises:
        ConfigError: a non-loopback bind without any token to require.
    """
    existing = tokens.list()
    if not is_loopback(host) and not existing:
        raise ConfigError(
            ConfigProblem("<cli>", "--http", f"refusing to listen on {host} without auth: {NO_AUTH_HINT}")
        )
    if require_auth and not existing:
        raise ConfigError(ConfigProblem("<cli>", "--auth", f"no token exists: {NO_AUTH_HINT}"))
    defaults = HttpSecurity()
    hosts = [*defaults.allowed_hosts, *([] if is_loopback(host) else [f"{host}:*"]), *allow_hosts]
    return HttpSecurity(
        allowed_hosts=hosts,
        allowed_origins=[*defaults.allowed_origins, *allow_origins],
        tokens=tokens if (existing or require_auth or not is_loopback(host)) else None,
        max_body_bytes=max_body_bytes or defaults.max_body_bytes,
    )


def _announce(line: str) -> None:
    sys.stderr.write(f"mcpmux: {line}\n")
    sys.stderr.flush()


async def serve(
    config: Config,
    options: ServeOptions,
    *,
    store: StateStore | None = None,
    announce: Callable[[str], None] = _announce,
) -> None:
    """Serve every configured server as one MCP server until a signal (or stdin's end)."""
    downstream = Downstream()
    async with Manager(config, callbacks=downstream.client_callbacks()) as manager:
        for status in manager.status():
            if status.state.value in ("failed", "needs-auth"):
                announce(f"warning: server {status.name!r} {status.state.value}: {status.reason}")
        guard = Guard(manager, face="gateway", store=store, approver=downstream.relay.approve)
        gateway = Gateway(guard, downstream=downstream, separator=options.separator)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            await tg.start(gateway.run)
            tg.start_soon(_stop_on_signal, stop)
            await _serve_faces(gateway, options, stop, announce)
            tg.cancel_scope.cancel()
    announce("stopped")


async def _serve_faces(
    gateway: Gateway, options: ServeOptions, stop: anyio.Event, announce: Callable[[str], None]
) -> None:
    http_stop = anyio.Event()
    async with anyio.create_task_group() as http_tg:
        if options.http is not None:
            port = await http_tg.start(serve_http, gateway, options.http, http_stop)
            announce(f"serving http://{_host(options.http.host)}:{port}/mcp")
        async with anyio.create_task_group() as streams:
            await _start_stream_faces(streams, gateway, options, stop, announce)
            await stop.wait()
            drained = await gateway.drain(options.drain_timeout_s)
            if not drained:
                logger.warning("calls still running after %.1f s; cancelling them", options.drain_timeout_s)
            streams.cancel_scope.cancel()
        http_stop.set()


async def _start_stream_faces(
    tg: anyio.abc.TaskGroup, gateway: Gateway, options: ServeOptions, stop: anyio.Event, announce: Callable[[str], None]
) -> None:
    if options.tcp is not None:
        port = await tg.start(serve_tcp, gateway.server, *options.tcp)
        announce(f"serving tcp://{_host(options.tcp[0])}:{port}")
    if options.ws is not None:
        port = await tg.start(serve_websocket, gateway.server, *options.ws)
        announce(f"serving ws://{_host(options.ws[0])}:{port}")
    if options.stdio:
        tg.start_soon(_serve_stdio, gateway, stop)
        announce("serving stdio")


async def _serve_stdio(gateway: Gateway, stop: anyio.Event) -> None:
    try:
        with stdio_channel():  # the one local client that started us: it may approve (gateway_approvers.stdio)
            async with stdio_server() as (read, write):
                await gateway.server.run(read, write, gateway.server.create_initialization_options())
    finally:
        stop.set()


async def _stop_on_signal(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for received in signals:
            logger.info("received %s; shutting down", signal.Signals(received).name)
            stop.set()
            return


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
