"""``mcpmux serve`` as a library call: the manager, the guard, the gateway and its listeners.

With a stdio face the gateway answers ``initialize`` at once, before the upstreams connect (a
client such as the MCP Inspector gives up after 15 s): it lists what is ready and sends
``list_changed`` as the others arrive. The network faces start once every upstream connected or
failed once. A listener that cannot bind is a :class:`~mcpmux.errors.ConfigError` naming its option.

Shutdown (SIGTERM, SIGINT, or the end of stdin in ``--stdio`` mode): new calls are refused,
calls in flight get ``drain_timeout_s`` to finish, the listeners close, and only then does the
manager stop the upstream servers. Only configured servers are ever started: nothing a network
client sends can make the gateway spawn a process.
"""

from __future__ import annotations

import errno
import logging
import math
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
import anyio.abc
from mcp.server.stdio import stdio_server
from starlette.types import ASGIApp

from mcpmux.config.models import Config
from mcpmux.errors import ConfigError, ConfigProblem, MCPMuxError, UsageError
from mcpmux.gateway.downstream import Downstream
from mcpmux.gateway.http import HttpOptions, serve_http
from mcpmux.gateway.relay import RELAY_TIMEOUT_S
from mcpmux.gateway.server import Gateway
from mcpmux.host import ConnectionFactory, Host
from mcpmux.policy import Approver, Guard, StateStore, ToolScope
from mcpmux.policy.pending import PendingApprovals
from mcpmux.policy.toolsets import Toolset, toolset_named
from mcpmux.provider_names import DEFAULT_SEPARATOR
from mcpmux.serve.cluster import Cluster, ReplicaOptions, SharedHeld
from mcpmux.transports.tcp import serve_tcp
from mcpmux.transports.websocket import Admit, Handshake, serve_websocket
from mcpmux.web.caller import TokenCaller, stdio_channel
from mcpmux.web.mounts import CONSOLE_PREFIX, ByPrefix
from mcpmux.web.oauth_resource import ExternalTokens
from mcpmux.web.security import Admitted, Gatekeeper, HttpSecurity, is_loopback
from mcpmux.web.tokens import TokenStore

__all__ = ["DEFAULT_DRAIN_TIMEOUT_S", "ServeOptions", "http_security", "serve"]

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_S = 10.0
NO_AUTH_HINT = "create a token first: mcpmux token create NAME (clients send it as 'Authorization: Bearer TOKEN')"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Which faces to serve and how to stop.

    ``ws_security`` holds the Host, Origin and token rules of the WebSocket handshake (by
    default loopback hosts and origins, no tokens).
    """

    stdio: bool = False
    http: HttpOptions | None = None
    tcp: tuple[str, int] | None = None
    ws: tuple[str, int] | None = None
    ws_security: HttpSecurity | None = None
    separator: str = DEFAULT_SEPARATOR
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    api: Callable[[Host, HttpSecurity, Approver | None], ASGIApp] | None = None
    """Makes the REST API over the gateway's host, served beside ``/mcp`` (``None``: no API)."""
    console: Callable[..., ASGIApp] | None = None
    """Makes the web console over the gateway's host, served at ``/ui`` (``None``: no console), called
    as ``console(host, security, pending)``, and with ``replica=`` (what returns this replica and its
    peers) on a replica. With it, and ``security.gateway_approvers.console``, a call its own client
    cannot approve waits there for a person."""
    agents: tuple[str, ...] = ()
    """Serve only these configured agents, each as the tool ``agents__ask_NAME`` (``mcpmux serve --agent``)."""
    functions: tuple[Callable[..., Any], ...] = ()
    """Python functions served beside the servers as the tools of ``python`` (:meth:`Host.add_tools`)."""
    toolset: str | None = None
    """Serve only this toolset on every face (``--toolset``); ``None``: everything, and over HTTP
    each configured toolset at ``/mcp/NAME``."""
    expose: tuple[str, ...] = ()
    """Serve only the tools, prompts and resources whose canonical names match these globs (``--expose``)."""
    replica: ReplicaOptions | None = None
    """Serve as one replica of several on a shared PostgreSQL (:mod:`mcpmux.serve.cluster`)."""


def http_security(
    host: str,
    tokens: TokenStore,
    *,
    require_auth: bool = False,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    max_body_bytes: int | None = None,
    option: str = "--http",
    external: ExternalTokens | None = None,
) -> HttpSecurity:
    """The HTTP (and WebSocket) rules for binding ``host``.

    Tokens are required off loopback, with ``require_auth``, and whenever any exists (checked at
    each request, so ``mcpmux token create`` on a running gateway takes effect at once).

    Raises:
        ConfigError: a non-loopback bind without any token to require.
        UsageError: ``require_auth`` without any token.
    """
    existing = tokens.any() or external is not None
    if not is_loopback(host) and not existing:
        raise ConfigError(ConfigProblem("<cli>", option, f"refusing to listen on {host} without auth: {NO_AUTH_HINT}"))
    if require_auth and not existing:
        raise UsageError("--auth requires a bearer token and none exists", hint=NO_AUTH_HINT)
    defaults = HttpSecurity()
    hosts = [*defaults.allowed_hosts, *([] if is_loopback(host) else [f"{_host(host)}:*"]), *allow_hosts]
    security = HttpSecurity(
        allowed_hosts=hosts,
        allowed_origins=[*defaults.allowed_origins, *allow_origins],
        tokens=tokens,
        external=external,
        require_token=require_auth or not is_loopback(host),
        max_body_bytes=max_body_bytes or defaults.max_body_bytes,
    )
    try:
        Gatekeeper(security)
    except ValueError as exc:
        raise ConfigError(ConfigProblem("<cli>", "--allow-host/--allow-origin", str(exc))) from exc
    return security


def _announce(line: str) -> None:
    sys.stderr.write(f"mcpmux: {line}\n")
    sys.stderr.flush()


async def serve(
    config: Config,
    options: ServeOptions,
    *,
    store: StateStore | None = None,
    announce: Callable[[str], None] = _announce,
    connection_factory: ConnectionFactory | None = None,
) -> None:
    """Serve every configured server as one MCP server until a signal (or stdin's end).

    ``connection_factory`` opens the upstream connections (``mcpmux record`` taps them).

    Raises:
        ConfigError: a listener cannot bind its address (in use, not local).
    """
    try:
        await _serve(config, options, store, announce, connection_factory)
    except BaseExceptionGroup as group:
        raise _sole_error(group) from None
    announce("stopped")


async def _serve(
    config: Config,
    options: ServeOptions,
    store: StateStore | None,
    announce: Callable[[str], None],
    connection_factory: ConnectionFactory | None = None,
) -> None:
    downstream = Downstream()
    host = Host(
        config, face="gateway", store=store, approver=downstream.relay.approve,
        callbacks=downstream.client_callbacks(), wait=not options.stdio, connection_factory=connection_factory,
    )  # fmt: skip
    surface: Guard = host
    if options.functions:
        await host.add_tools(options.functions)
    if options.agents:
        surface = host.scoped(await serve_agents(host, options.agents))
    async with host, anyio.create_task_group() as tg:
        gateways: list[Gateway] = []
        cluster = None if options.replica is None else _replica(host, options, downstream, gateways)
        state = None if cluster is None else cluster.request_state_security(RELAY_TIMEOUT_S)
        if cluster is not None:
            await tg.start(cluster.run)
            await tg.start(_follow_changes, host, cluster)
            announce(f"replica {cluster.id} of {len(cluster.peers())} live, reached at {cluster.me.advertise}")
        if options.http is not None:
            options = replace(options, http=_with_apps(host, options, downstream, cluster))
        only = toolset_named(config, options.toolset) if options.toolset is not None else None
        if options.expose:
            only = Toolset.exposing(options.expose, config.discovery)
        toolsets: dict[str, Gateway] = {}
        if only is None and options.http is not None and not options.agents:  # --agent: its tools alone
            for name in config.toolsets:
                served = Toolset.of(name, config.toolsets[name], config.discovery)
                toolsets[name] = Gateway(
                    host, downstream=downstream, separator=options.separator, toolset=served, announce=False,
                    request_state=state,
                )  # fmt: skip
        # Made last: the downstream's URI and unsubscribe hooks follow the gateway that sees every resource,
        # and it alone announces list changes, to every client of every path (they share the downstream).
        gateway = Gateway(
            surface, downstream=downstream, separator=options.separator, toolset=only, request_state=state
        )
        gateways += [gateway, *toolsets.values()]
        for served_gateway in toolsets.values():
            served_gateway.metrics = gateway.metrics
        stop = anyio.Event()
        # Subscribed before the first attempts end, so no upstream arriving later goes unannounced.
        for served_gateway in (*toolsets.values(), gateway):
            await tg.start(served_gateway.run)
        tg.start_soon(_stop_on_signal, stop)
        if options.stdio:
            attempted = anyio.Event()
            gateway.starting(attempted)
            tg.start_soon(_warn_failed, host, announce, attempted)
        else:
            _report_failed(host, announce)
        await _serve_faces(gateway, options, stop, announce, toolsets)
        tg.cancel_scope.cancel()


def _replica(host: Host, options: ServeOptions, downstream: Downstream, gateways: list[Gateway]) -> Cluster:
    """This gateway as a replica: its load in the heartbeat, tokens and lists following the others' events.

    Raises:
        ConfigError: the state database is not PostgreSQL.
    """
    assert options.replica is not None

    def load() -> tuple[int, int]:
        return len(downstream), sum(g.in_flight for g in gateways)

    cluster = Cluster(host.store, options.replica, load=load)
    for security in (options.http.security if options.http else None, options.ws_security):
        if security is not None and security.tokens is not None:
            security.tokens.follow(lambda: cluster.listening)
            cluster.on("tokens", security.tokens.invalidate)

    def pins_changed(_detail: str) -> None:
        for gateway in gateways:
            gateway.stale()

    cluster.on("pins", pins_changed)
    return cluster


async def _follow_changes(
    host: Host, cluster: Cluster, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Keep this replica's servers in step with what other replicas changed: sources registered,
    changed or removed, and servers disabled or enabled at run time.

    The replica that made a change has done it already (its server equals the registered one, its
    server's state is the remembered one) and is left alone; servers of the configuration files are
    never replaced by sources.
    """
    from mcpmux.sources.registry import SourceRegistry

    changed, heard = anyio.create_memory_object_stream[tuple[str, str]](math.inf)
    registry = SourceRegistry.configured(host.config, host.store.url)
    configured = {s.name for s in host.config.servers}
    cluster.on("sources", lambda name: changed.send_nowait(("sources", name)))
    cluster.on("servers", lambda name: changed.send_nowait(("servers", name)))
    task_status.started()
    try:
        async with changed, heard:
            async for topic, name in heard:
                try:
                    if topic == "sources":
                        await _follow_source(host, registry, configured, name)
                    else:
                        await _follow_switch(host, name)
                except MCPMuxError as exc:
                    logger.warning("replica %s could not follow the change of %s %s: %s", cluster.id, topic, name, exc)
    finally:
        registry.close()


async def _follow_switch(host: Host, name: str) -> None:
    """Disable or enable ``name`` (``*``: every server) as another replica did."""
    remembered = await anyio.to_thread.run_sync(host.switches.all_disabled)
    for status in host.status():
        if name not in ("*", status.name):
            continue
        reason = remembered.get((host.pins.identity(status.name), status.name))
        disabled = status.state.value == "disabled"
        if reason is not None and not disabled:
            await host.manager.disable(status.name, reason)
            logger.info("server %s was disabled on another replica: disabled here too", status.name)
        elif reason is None and disabled and _enabled_in_config(host, status.name):
            await host.manager.enable(status.name)
            logger.info("server %s was enabled on another replica: enabled here too", status.name)


def _enabled_in_config(host: Host, name: str) -> bool:
    return any(s.name == name and s.enabled for s in host.manager.config.servers)


async def _follow_source(host: Host, registry: Any, configured: set[str], name: str) -> None:
    from mcpmux.errors import NotFound

    names = {s.name for s in await anyio.to_thread.run_sync(registry.all)} if name == "*" else {name}
    if name == "*":
        names |= {s.name for s in host.manager.config.servers} - configured
    for one in sorted(names - configured):
        try:
            source = await anyio.to_thread.run_sync(registry.get, one)
        except NotFound:
            source = None
        running = next((s for s in host.manager.config.servers if s.name == one), None)
        if source is None:
            if running is not None:
                await host.manager.remove_server(one)
            continue
        server = await anyio.to_thread.run_sync(registry.server_config, source)
        if running == server:
            continue
        if running is not None:
            await host.manager.remove_server(one)
        await host.manager.add_server(server, start=source.lifecycle == "singleton")
        logger.info("source %s changed on another replica: its server follows", one)


def _with_apps(
    host: Host, options: ServeOptions, downstream: Downstream, cluster: Cluster | None = None
) -> HttpOptions:
    """The HTTP options with the REST API and the console mounted beside ``/mcp``."""
    assert options.http is not None
    security = options.http.security
    console: ASGIApp | None = None
    pending: PendingApprovals | None = None
    if options.console is not None:
        security = replace(security, own_auth_prefixes=(*security.own_auth_prefixes, CONSOLE_PREFIX))
        approvers = host.config.security.gateway_approvers
        if approvers.console:
            board = None if cluster is None else SharedHeld(cluster)
            pending = PendingApprovals(approvers.console_timeout_s, host.config.secret_values, board=board)
            if cluster is not None:
                cluster.on("held", pending.heard)
                cluster.on("answered", pending.heard)
            downstream.relay.held = pending
        shown = {} if cluster is None else {"replica": cluster.to_json}
        console = options.console(host, security, pending, **shown)
    # REST callers' calls that need approval wait in the console's queue too (None: refused).
    api = options.api(host, security, pending) if options.api is not None else None
    extra = api if console is None else ByPrefix(CONSOLE_PREFIX, console, api)
    return replace(options.http, security=security, extra=extra, cluster=cluster)


async def serve_agents(host: Host, agents: Sequence[str]) -> ToolScope:
    """Add ``ask_NAME`` for each agent to ``host``; the scope that shows a client those tools alone."""
    from mcpmux.agents.ask import AgentTools

    names = await AgentTools(host).install(agents)
    return ToolScope(f"mcpmux serve --agent {' '.join(agents)}", "gateway", tuple(names))


def _report_failed(host: Host, announce: Callable[[str], None]) -> None:
    for status in host.status():
        if status.state.value in ("failed", "needs-auth"):
            announce(f"warning: server {status.name!r} {status.state.value}: {status.reason}")


async def _warn_failed(host: Host, announce: Callable[[str], None], attempted: anyio.Event) -> None:
    await host.wait_started()
    attempted.set()
    _report_failed(host, announce)


def _sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one mcpmux error behind nested task groups, so the CLI prints one line; else the group."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    if len(leaves) == 1 and isinstance(leaves[0], MCPMuxError):
        return leaves[0]
    return group


async def _serve_faces(
    gateway: Gateway,
    options: ServeOptions,
    stop: anyio.Event,
    announce: Callable[[str], None],
    toolsets: Mapping[str, Gateway] | None = None,
) -> None:
    http_stop = anyio.Event()
    toolsets = toolsets or {}
    async with anyio.create_task_group() as http_tg:
        if options.http is not None:
            where = options.http.host, options.http.port
            started = http_tg.start(partial(serve_http, toolsets=toolsets), gateway, options.http, http_stop)
            port = await _listen("--http", where, started)
            base = f"http://{_host(options.http.host)}:{port}"
            subset = f" (toolset {options.toolset})" if options.toolset else ""
            subset = f" (exposing {' '.join(options.expose)})" if options.expose else subset
            announce(f"serving {base}/mcp{subset}")
            for name in toolsets:
                announce(f"serving toolset {name} at {base}/mcp/{name}")
        async with anyio.create_task_group() as streams:
            await _start_stream_faces(streams, gateway, options, stop, announce)
            await stop.wait()
            drained = await _drain((gateway, *toolsets.values()), options.drain_timeout_s)
            if not drained:
                logger.warning("calls still running after %.1f s; cancelling them", options.drain_timeout_s)
            streams.cancel_scope.cancel()
        http_stop.set()


async def _drain(gateways: Sequence[Gateway], timeout_s: float) -> bool:
    """Drain every gateway at once, within one ``timeout_s``; whether all their calls ended."""
    drained: list[bool] = []

    async def drain(gateway: Gateway) -> None:
        drained.append(await gateway.drain(timeout_s))

    async with anyio.create_task_group() as tg:
        for gateway in gateways:
            tg.start_soon(drain, gateway)
    return all(drained)


async def _start_stream_faces(
    tg: anyio.abc.TaskGroup, gateway: Gateway, options: ServeOptions, stop: anyio.Event, announce: Callable[[str], None]
) -> None:
    if options.tcp is not None:
        port = await _listen("--tcp", options.tcp, tg.start(serve_tcp, gateway.server, *options.tcp))
        announce(f"serving tcp://{_host(options.tcp[0])}:{port}")
    if options.ws is not None:
        admit = websocket_admission(options.ws_security or HttpSecurity(), toolset=options.toolset)
        started = tg.start(partial(serve_websocket, gateway.server, *options.ws, admit=admit))
        port = await _listen("--ws", options.ws, started)
        announce(f"serving ws://{_host(options.ws[0])}:{port}")
    if options.stdio:
        tg.start_soon(_serve_stdio, gateway, stop)
        announce("serving stdio")


def websocket_admission(security: HttpSecurity, *, toolset: str | None = None) -> Admit:
    """The WebSocket handshake check: the HTTP face's Origin, Host and token rules.

    A token bound to toolsets is admitted only by a gateway serving one of them (``toolset``).
    """
    gate = Gatekeeper(security)

    async def admit(headers: Mapping[str, str]) -> Handshake:
        await gate.refresh(gate.token_of(headers))  # an external token: rotated keys, introspection
        verdict = gate.admit(headers)
        if isinstance(verdict, Admitted) and verdict.toolsets and toolset not in verdict.toolsets:
            where = ", ".join(f"mcpmux serve --toolset {name}" for name in verdict.toolsets)
            return Handshake(refuse_status=403, reason=f"This token is bound to its toolsets: use {where}")
        if isinstance(verdict, Admitted):
            name = verdict.token_name
            caller = None if name is None else TokenCaller(name, verdict.scopes, verdict.groups, verdict.api_scopes)
            return Handshake(still_valid=gate.still_valid(verdict), context=caller)
        return Handshake(refuse_status=verdict.status, reason=verdict.reason)

    return admit


async def _listen(option: str, where: tuple[str, int], started: Awaitable[int]) -> int:
    """The port ``started`` reports, or a :class:`ConfigError` for ``option`` if it cannot bind."""
    try:
        return await started
    except OSError as exc:
        address = f"{_host(where[0])}:{where[1]}"
        reason = "the address is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        error = ConfigError(ConfigProblem("<cli>", option, f"cannot listen on {address}: {reason}"))
        error.hint = f"choose another port ({_host(where[0])}:0 takes a free one) or stop what listens on {address}"
        raise error from exc


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
