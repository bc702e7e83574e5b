"""The gateway: one SDK low-level :class:`~mcp.server.Server` in front of a :class:`Guard`.

::

    downstream = Downstream()
    async with Host(config, face="gateway", callbacks=downstream.client_callbacks()) as host:
        gateway = Gateway(host, downstream=downstream)
        async with anyio.create_task_group() as tg:
            await tg.start(gateway.run)             # follows upstream list changes
            await gateway.server.run(read, write, gateway.server.create_initialization_options())

A gateway may be served before its upstreams have connected (``mcpmux serve`` over stdio answers
``initialize`` at once): then lists and calls wait up to ``grace_s`` for the upstreams' first
attempts (:meth:`Gateway.starting`), so a client that lists right after ``initialize`` sees what
connects quickly, and ``list_changed`` announces the rest.

Every request goes through the guard (policy, approval, audit with the caller's identity): the
gateway never holds an upstream connection;
``Gateway.run`` must be running while clients are served, or the lists go stale, and it owns the
calls of stateless-era clients that wait between rounds for an answer (:mod:`.stateless`).
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider
from starlette.requests import Request

from mcpmux._private.mcp_sdk import OpenTelemetryMiddleware, connection_of
from mcpmux._version import __version__
from mcpmux.errors import ERROR_META, MCPMuxError, ServerDisabled, ServerError, ToolNotFound, error_meta
from mcpmux.gateway.discovery import CALL_TOOL, SEARCH_TOOLS, Discovery, call_arguments
from mcpmux.gateway.downstream import Downstream
from mcpmux.gateway.metrics import Metrics
from mcpmux.gateway.relay import RELAY_TIMEOUT_S, UNVERIFIED, Asker, LiveCall
from mcpmux.gateway.responses import DIRECT_CALLS, DeferredTransport, Keepalive
from mcpmux.gateway.stateless import ParkedCall, ParkedCalls
from mcpmux.gateway.surface import Surface, build_surface
from mcpmux.policy import Guard
from mcpmux.policy.toolsets import Toolset
from mcpmux.provider_names import DEFAULT_SEPARATOR
from mcpmux.types import ServerState, ToolInfo
from mcpmux.types.events import ListChanged, StateChanged
from mcpmux.web.caller import approver_of, caller_of, may_call_tools

__all__ = ["RESOURCE_NOT_FOUND", "Gateway", "list_cache_hint"]

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
UNWATCH_QUEUE = 256
# How long a list or call waits for upstreams still on their first attempt: well under the 10 s a
# client such as the MCP Inspector gives a request, long enough for a typical npx or uvx server.
STARTUP_GRACE_S = 5.0
# A client with either capability can be asked a question; the others never are.
_ANSWERING = (
    types.ClientCapabilities(sampling=types.SamplingCapability()),
    types.ClientCapabilities(elicitation=types.ElicitationCapability()),
)
Ctx = ServerRequestContext[Any, Any]
_T = TypeVar("_T")


class Gateway:
    """Every upstream behind ``guard``, served as one MCP server.

    Args:
        guard: the started host (or its :meth:`~Guard.with_face` view) with ``face`` ``gateway``.
        downstream: the downstream registry whose callbacks the manager was built with.
        separator: joins namespace and name in downstream tool and prompt names.
        metrics: where call counts and latencies go.
        name: the server name the gateway gives in ``initialize``.
        toolset: serve only this toolset (:mod:`mcpmux.policy.toolsets`), with its discovery setting;
            ``None``: everything the guard lets through, with the global ``discovery:``.
        announce: tell ``downstream``'s clients about list changes. Gateways that share one
            downstream (a toolset's beside the whole one) let one of them announce, so a client is
            told once.
        request_state: how stateless clients' ``requestState`` is sealed (default: a key of this
            process; replicas share one, :meth:`mcpmux.serve.cluster.Cluster.request_state_security`).
    """

    def __init__(
        self,
        guard: Guard,
        *,
        downstream: Downstream | None = None,
        separator: str = DEFAULT_SEPARATOR,
        metrics: Metrics | None = None,
        name: str = "mcpmux",
        toolset: Toolset | None = None,
        announce: bool = True,
        request_state: RequestStateSecurity | None = None,
    ) -> None:
        self.guard = guard.with_toolset(toolset) if toolset is not None else guard
        self.toolset, self.announce = toolset, announce
        self.discovery = Discovery(toolset.discovery if toolset is not None else guard.config.discovery)
        self.downstream = downstream if downstream is not None else Downstream()
        self.downstream.relay.approvers = guard.config.security.gateway_approvers
        self.separator = separator
        self.metrics = metrics if metrics is not None else Metrics()
        self.metrics.cache_stats = guard.cache.stats
        self._surface: Surface | None = None
        self.draining = False
        self._in_flight = 0
        self._idle = anyio.Event()
        self.downstream.downstream_uri = self._downstream_uri
        self.downstream.unwatched = self._unwatched
        self._unwatch_queue: MemoryObjectSendStream[tuple[str, str]] | None = None
        self._parked = ParkedCalls()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._starting: anyio.Event | None = None
        self._grace_until = 0.0
        self._listen_handler = ListenHandler(self.downstream.bus)
        self.keepalive = Keepalive()
        """Pings the answers of HTTP calls served directly (:mod:`.direct`) while they are quiet."""
        self.server = self._build_server(name, request_state or RequestStateSecurity.ephemeral(ttl=RELAY_TIMEOUT_S))

    # -- the surface ----------------------------------------------------------------------------

    @property
    def surface(self) -> Surface:
        """The current downstream view (rebuilt after any upstream list or state change)."""
        if self._surface is None:
            self._surface = build_surface(self.guard, self.separator)
        return self._surface

    def _downstream_uri(self, server: str, uri: str) -> str:
        return self.surface.downstream_uri(server, uri)

    def starting(self, attempted: anyio.Event, grace_s: float = STARTUP_GRACE_S) -> None:
        """Serve before the upstreams connected: lists and calls wait up to ``grace_s`` (from now) for ``attempted``.

        ``attempted`` is set once every upstream that should start has connected or failed once.
        """
        self._starting, self._grace_until = attempted, anyio.current_time() + grace_s

    async def _settled(self) -> None:
        """Wait (bounded by the grace) for the upstreams' first attempts, then never again."""
        starting = self._starting
        if starting is None:
            return
        with anyio.move_on_after(self._grace_until - anyio.current_time()):
            await starting.wait()
        self._starting = None

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new calls and wait up to ``timeout_s`` for the calls in flight; return whether all ended."""
        self.draining = True
        with anyio.move_on_after(timeout_s):
            while self._in_flight:
                self._idle = anyio.Event()
                await self._idle.wait()
            return True
        return False

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the manager's events: rebuild the surface and tell clients what changed."""
        unwatch, unwatched = anyio.create_memory_object_stream[tuple[str, str]](UNWATCH_QUEUE)
        async with self.guard.events() as events, unwatch, unwatched, anyio.create_task_group() as tg:
            self._unwatch_queue, self._tasks = unwatch, tg
            tg.start_soon(self._drop_unwatched, unwatched)
            await tg.start(self.keepalive.run)
            task_status.started()
            try:
                async for event in events:
                    self._surface = None
                    if not self.announce:
                        continue
                    if isinstance(event, ListChanged) and event.kind in ("tools", "prompts", "resources"):
                        await self.downstream.list_changed(event.kind)
                    elif isinstance(event, StateChanged):
                        await self.downstream.list_changed("tools")
            finally:
                self._unwatch_queue, self._tasks = None, None
                tg.cancel_scope.cancel()

    async def _drop_unwatched(self, queue: MemoryObjectReceiveStream[tuple[str, str]]) -> None:
        async for server, uri in queue:
            if not self.downstream.subscribed(self.surface.downstream_uri(server, uri)):
                await self._unwatch(server, uri)

    # -- the server -----------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Tool calls running now."""
        return self._in_flight

    def stale(self) -> None:
        """Something the lists are made of changed elsewhere (another replica approved a pin): build
        the lists again, and tell the clients."""
        self._surface = None
        if self.announce and self._tasks is not None:
            self._tasks.start_soon(self.downstream.list_changed, "tools")

    def _build_server(self, name: str, security: RequestStateSecurity) -> Server[Any]:
        # Every method is served; what is advertised follows the upstreams at each initialize.
        handlers: dict[str, Any] = {
            "on_list_tools": self._list_tools,
            "on_call_tool": self.call_tool,
            "on_list_prompts": self._list_prompts,
            "on_get_prompt": self._get_prompt,
            "on_list_resources": self._list_resources,
            "on_list_resource_templates": self._list_templates,
            "on_read_resource": self._read_resource,
            "on_subscribe_resource": self._subscribe,
            "on_unsubscribe_resource": self._unsubscribe,
            "on_completion": self._complete,
            "on_set_logging_level": self._set_logging_level,
        }
        with warnings.catch_warnings():
            # logging/setLevel is deprecated in 2026-07-28 but still served to 2025-era clients.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = _GatewayServer(
                name,
                upstream=self._upstream_capabilities,
                version=__version__,
                on_subscriptions_listen=self._listen,
                **handlers,
            )
        server.add_notification_handler("notifications/initialized", types.NotificationParams, self._initialized)
        if isinstance(get_tracer_provider(), ProxyTracerProvider):
            # No OpenTelemetry SDK is configured, so the SDK's span per request records nothing,
            # but it still costs ~7 % of a short call's CPU through the gateway (measured).
            server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
        # The requestState of a stateless-era question goes out sealed (AES-GCM under a key of this
        # process or of the replicas, bound to the tool, its arguments and the caller) and comes back verified.
        server.middleware.append(RequestStateBoundary(security, default_audience=name))
        return server

    def _upstream_capabilities(self) -> types.ServerCapabilities:
        if self._starting is not None and not self._starting.is_set():
            # Upstreams still connecting may bring any of these: a client that initializes now is
            # told they exist (their lists may be empty at first; list_changed follows).
            return types.ServerCapabilities(
                prompts=types.PromptsCapability(), resources=types.ResourcesCapability(),
                completions=types.CompletionsCapability(), logging=types.LoggingCapability(),
            )  # fmt: skip
        return self.guard.capabilities()

    async def _initialized(self, ctx: Ctx, params: types.NotificationParams) -> None:
        self.downstream.remember(ctx.session)
        transport = ctx.request.scope.get(DIRECT_CALLS) if isinstance(ctx.request, Request) else None
        if isinstance(transport, DeferredTransport) and self.keepalive.running and self._serves_directly():
            transport.serve_calls_directly(self.call_tool, connection_of(ctx.session), self.keepalive)

    def _serves_directly(self) -> bool:
        """Whether a direct call (:mod:`.direct`) does all that this server's middleware would do.

        The only middleware left on a plain gateway is the ``requestState`` boundary, which never
        acts on a direct call (it carries no ``requestState``); with tracing configured (the SDK's
        span per request) every call keeps the SDK's path.
        """
        return all(isinstance(m, RequestStateBoundary) for m in self.server.middleware)

    # -- handlers -------------------------------------------------------------------------------

    async def _list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if self._starting is not None:
            await self._settled()
        surface = self.surface
        listed = self.discovery.listing(surface).tools
        return types.ListToolsResult(tools=listed, **self._hint("tools/list", {t.server for t in surface.tool_infos}))

    def _hint(self, method: str, servers: set[str]) -> dict[str, Any]:
        """``ttl_ms`` and ``cache_scope`` of a list made of ``servers``' items (see :func:`list_cache_hint`)."""
        hints = [self.guard.list_hint(server, method) for server in sorted(servers)]
        ttl_ms, scope = list_cache_hint(hints, self.discovery.config.list_ttl_ms)
        return {"ttl_ms": ttl_ms, "cache_scope": scope}

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """``tools/call``: the handler of the server, and of the HTTP transport's direct calls."""
        if self.draining:
            raise MCPError(types.INTERNAL_ERROR, "the gateway is shutting down")
        if not may_call_tools(ctx):
            who = caller_of(ctx)
            raise MCPError(
                types.INVALID_REQUEST,
                f"{who} may not call tools: its token lacks the scope 'execute' (it may list and read); "
                "make one that may with `mcpmux token create NAME --scope execute`",
            )
        if self._starting is not None:
            await self._settled()
        surface = self.surface
        listing = self.discovery.listing(surface)
        if listing.searching and params.name == SEARCH_TOOLS:
            return self.discovery.search(listing, params.arguments)
        if listing.searching and params.name == CALL_TOOL:
            name, arguments = call_arguments(params.arguments)
            params = params.model_copy(update={"name": name, "arguments": arguments})
        try:
            tool = _lookup(surface.tool, params.name, types.INVALID_PARAMS)
        except MCPError:
            disabled = self._disabled_for(params.name)
            if disabled is None:
                raise
            text = f"{disabled}\nhint: {disabled.hint}"
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        started, outcome = time.perf_counter(), "error"
        self._in_flight += 1
        try:
            result = await self._call(ctx, params, tool)
            if isinstance(result, types.InputRequiredResult):
                outcome = "input_required"
            else:
                outcome = "tool_error" if result.is_error else "ok"
            return result
        except ServerError as exc:
            raise MCPError(exc.code, exc.error_message, exc.data) from exc
        except MCPMuxError as exc:
            message = f"{exc}\nhint: {exc.hint}" if exc.hint else str(exc)
            meta = {ERROR_META: error_meta(exc)}  # what it was, for an mcpmux client (mcpmux.attach.thin)
            return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True, meta=meta)
        finally:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.set()
            self.metrics.observe_call(tool.server, tool.tool, outcome, time.perf_counter() - started)

    def _disabled_for(self, name: str) -> ServerDisabled | None:
        """Why a call to ``name`` fails when its namespace is a disabled server's (whose tools left the list)."""
        namespace, separator, _ = name.partition(self.separator)
        if not separator:
            return None
        for status in self.guard.status():
            if status.state is ServerState.DISABLED and self.guard.config.server(status.name).namespace == namespace:
                return ServerDisabled(status.name, status.reason)
        return None

    async def _call(
        self, ctx: Ctx, params: types.CallToolRequestParams, tool: ToolInfo
    ) -> types.CallToolResult | types.InputRequiredResult:
        """One call of a handshake-era client, or one round of a stateless-era one (see :mod:`.stateless`)."""
        caller, answerer = caller_of(ctx), approver_of(ctx, self.downstream.relay.approvers)
        if params.request_state is not None:  # a retry; the boundary has checked that we sealed it
            parked = self._parked.resume(params.request_state, caller)
            if parked is None:
                raise MCPError(types.INVALID_PARAMS, "this call no longer waits for an answer: call the tool again")
            return await self._collect(parked, ctx, params.input_responses)
        if self._tasks is not None and _can_be_asked(ctx):
            parked = ParkedCall(ctx, caller)
            self._parked.add(parked)
            guarded = partial(self._guarded, parked, tool, params.arguments, caller, answerer)
            self._tasks.start_soon(parked.run, guarded)
            return await self._collect(parked, ctx, None)
        # A client that sent no progress token gets no progress: the upstream is asked for none, which
        # also leaves the call on the connection's lean path (a call with progress takes the SDK's).
        progress = bool(ctx.meta and ctx.meta.get("progress_token") is not None)
        return await self._guarded(LiveCall(ctx), tool, params.arguments, caller, answerer, progress=progress)

    async def _guarded(
        self,
        call: Asker,
        tool: ToolInfo,
        arguments: dict[str, Any] | None,
        caller: str | None,
        answerer: str | None,
        *,
        progress: bool = True,
    ) -> types.CallToolResult:
        # Who may approve is decided here, in the request's own context (the channel it came on).
        with self.downstream.relay.calling(tool.server, call, answerer):
            return await self.guard.call_tool(
                tool, arguments, caller=caller, answered_by=answerer or UNVERIFIED,
                on_progress=call.report_progress if progress else None,
            )  # fmt: skip

    def _answerer(self, ctx: Ctx) -> str:
        return approver_of(ctx, self.downstream.relay.approvers) or UNVERIFIED

    async def _collect(
        self, parked: ParkedCall, ctx: Ctx, answers: dict[str, types.InputResponse] | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            result = await parked.round(ctx, answers)
        except BaseException:
            # The call failed (its error is the answer), or the client left the round and so the call.
            self._parked.done(parked)
            raise
        if not isinstance(result, types.InputRequiredResult):
            self._parked.done(parked)
        return result

    async def _list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        if self._starting is not None:
            await self._settled()
        surface = self.surface
        hint = self._hint("prompts/list", {p.server for p in surface.prompt_infos})
        return types.ListPromptsResult(prompts=surface.prompts, **hint)

    async def _get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt_info = _lookup(self.surface.prompt, params.name, types.INVALID_PARAMS)
        prompt = self.guard.get_prompt(
            prompt_info, params.arguments, caller=caller_of(ctx), answered_by=self._answerer(ctx)
        )
        return await _upstream(prompt)

    async def _list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        if self._starting is not None:
            await self._settled()
        surface = self.surface
        hint = self._hint("resources/list", {server for server, _ in surface.resource_targets})
        return types.ListResourcesResult(resources=surface.resources, **hint)

    async def _list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        if self._starting is not None:
            await self._settled()
        surface = self.surface
        hint = self._hint("resources/templates/list", set(surface.template_servers))
        return types.ListResourceTemplatesResult(resource_templates=surface.templates, **hint)

    async def _read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        server, uri = _find_resource(self.surface, ctx, params.uri)
        read = self.guard.read_resource(server, uri, caller=caller_of(ctx), answered_by=self._answerer(ctx))
        result = await _upstream(read)
        contents = [c.model_copy(update={"uri": params.uri}) if c.uri == uri else c for c in result.contents]
        return types.ReadResourceResult(contents=contents)

    async def _subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        # One upstream subscription per resource, shared by the clients subscribed to it.
        server, uri = _find_resource(self.surface, ctx, params.uri)
        if self.downstream.subscribe(ctx.session, params.uri):
            try:
                await _upstream(self.guard.subscribe_resource(server, uri, caller=caller_of(ctx)))
            except BaseException:
                self.downstream.unsubscribe(ctx.session, params.uri)
                raise
        return types.EmptyResult()

    async def _listen(
        self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        # A stateless-era client subscribes to resources with its listen filter: the gateway holds
        # the upstream subscriptions for as long as the stream is open, shared as _subscribe's are.
        key, watched = self.downstream.listen_key(), []
        try:
            for uri in params.notifications.resource_subscriptions or ():
                server, upstream_uri = _find_resource(self.surface, ctx, uri)
                first = self.downstream.watch(key, uri)
                watched.append((uri, server, upstream_uri))
                if first:
                    await _upstream(self.guard.subscribe_resource(server, upstream_uri, caller=caller_of(ctx)))
            return await self._listen_handler(ctx, params)
        finally:
            for uri, server, upstream_uri in watched:
                if self.downstream.unwatch(key, uri):
                    self._unwatched(server, upstream_uri)  # queued: this task may be cancelled

    async def _unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        server, uri = _find_resource(self.surface, ctx, params.uri)
        if self.downstream.unsubscribe(ctx.session, params.uri):
            await self._unwatch(server, uri)
        return types.EmptyResult()

    async def _unwatch(self, server: str, uri: str) -> None:
        """Drop the upstream subscription to ``uri`` on ``server``: nobody downstream wants it now.

        The client's own subscription is gone either way, so a failure here is only logged.
        """
        try:
            await self.guard.unsubscribe_resource(server, uri)
        except MCPMuxError as exc:
            logger.info("could not unsubscribe from %s on %s: %s", uri, server, exc)

    def _unwatched(self, server: str, uri: str) -> None:
        # Called from the upstream connection's notification handling, which must not wait on a
        # request to the same upstream: the unsubscribe is queued for Gateway.run.
        try:
            if self._unwatch_queue is not None:
                self._unwatch_queue.send_nowait((server, uri))
        except anyio.WouldBlock:
            logger.debug("unsubscribe queue full; %s on %s stays subscribed", uri, server)

    async def _complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        server: str | None = None
        if isinstance(ref, types.PromptReference):
            prompt = _lookup(self.surface.prompt, ref.name, types.INVALID_PARAMS)
            ref = ref.model_copy(update={"name": prompt.name})
        else:
            server = _lookup(self.surface.template_server, ref.uri, types.INVALID_PARAMS)
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        return await _upstream(self.guard.complete(ref, argument, context, server=server, caller=caller_of(ctx)))

    async def _set_logging_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        await _upstream(self.guard.set_logging_level(params.level, caller=caller_of(ctx)))
        return types.EmptyResult()


class _GatewayServer(Server[Any]):
    """The low-level server of the gateway: capabilities follow the upstreams, ``listChanged`` is on.

    Capabilities are worked out again for every ``initialize`` (and ``server/discover``) from the
    upstreams connected at that moment, so a server that connects late, or is added, shows up
    for every client that connects after it. ``listChanged`` is advertised by default because
    upstreams come and go: every transport adapter (ours and the SDK's) calls
    ``create_initialization_options()`` without arguments.
    """

    def __init__(self, name: str, *, upstream: Callable[[], types.ServerCapabilities], **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._upstream = upstream

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None:
            notification_options = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
        return super().create_initialization_options(notification_options, experimental_capabilities, extensions)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        served = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        has = self._upstream()
        resources = served.resources
        if resources is not None and has.resources is not None and not has.resources.subscribe:
            resources = resources.model_copy(update={"subscribe": False})
        return served.model_copy(
            update={
                "prompts": served.prompts if has.prompts is not None else None,
                "resources": resources if has.resources is not None else None,
                "completions": served.completions if has.completions is not None else None,
                "logging": served.logging if has.logging is not None else None,
            }
        )


def list_cache_hint(hints: list[tuple[int, bool] | None], default_ttl_ms: int) -> tuple[int, str]:
    """The ``(ttlMs, cacheScope)`` of a list made from upstream lists with ``hints``.

    The smallest TTL of what went into it (an upstream without a hint, a 2025-era server that
    announces changes with ``list_changed``, counts as ``default_ttl_ms``), and ``private`` if any
    upstream said so. An empty list gets ``default_ttl_ms`` and ``public``.
    """
    ttls = [default_ttl_ms if hint is None else hint[0] for hint in hints]
    private = any(hint is not None and hint[1] for hint in hints)
    return min(ttls, default=default_ttl_ms), "private" if private else "public"


def _can_be_asked(ctx: Ctx) -> bool:
    """Whether ``ctx`` is a stateless-era request whose client declared it can answer a question."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    return any(ctx.session.check_client_capability(answering) for answering in _ANSWERING)


def _find_resource(surface: Surface, ctx: Ctx, uri: str) -> tuple[str, str]:
    """``(server, upstream URI)`` behind ``uri``, or the era's "resource not found" error.

    2025-11-25 names it -32002; 2026-07-28 (SEP-2164) uses -32602 (Invalid Params). Both carry the URI.
    """
    try:
        return surface.resource(uri)
    except ToolNotFound as exc:
        code = types.INVALID_PARAMS if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
        raise MCPError(code, str(exc), {"uri": uri}) from exc


def _lookup(resolve: Callable[[str], _T], name: str, code: int) -> _T:
    try:
        return resolve(name)
    except ToolNotFound as exc:
        raise MCPError(code, str(exc)) from exc


async def _upstream(call: Awaitable[_T]) -> _T:
    """Await an upstream request, turning mcpmux errors into JSON-RPC errors for the client."""
    try:
        return await call
    except ServerError as exc:
        raise MCPError(exc.code, exc.error_message, exc.data) from exc
    except ToolNotFound as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
    except MCPMuxError as exc:
        raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc
