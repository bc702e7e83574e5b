"""The manager: many servers behind one namespaced index, with routing and supervision.

::

    async with Manager(load_config()) as manager:       # starts every enabled server concurrently
        manager.tools()                                 # list[ToolInfo], canonical "server:tool"
        await manager.call_tool("time:get_current_time", {"timezone": "UTC"})
        manager.status()                                # per server: state, reason, pid/url, ...
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp_types.version import MODERN_PROTOCOL_VERSIONS as MODERN_ERA

from mcpmux.config.effective import with_effective_sandbox
from mcpmux.config.models import Config, ServerConfig, Settings
from mcpmux.connection.skills import SkillEntry
from mcpmux.errors import (
    ConfigError,
    ConfigProblem,
    MCPMuxError,
    ServerDisabled,
    ServerNotConfigured,
    ServerUnavailable,
    SessionExpired,
    ToolNotFound,
)
from mcpmux.manager.catalog import Catalog, CatalogEntry, fingerprint
from mcpmux.manager.registry import GET_PROMPT, READ_RESOURCE, Registry, ServerCatalog
from mcpmux.manager.supervisor import ConnectionFactory, Supervisor
from mcpmux.processes.usage import server_pid
from mcpmux.types.callbacks import ClientCallbacks, ListKind
from mcpmux.types.events import Event, EventHub
from mcpmux.types.json_shapes import JSONObject
from mcpmux.types.models import PromptInfo, ResourceInfo, ServerState, ServerStatus, ToolInfo

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

    from mcpmux.connection import Connection, ConnectionInfo

__all__ = ["DEFAULT_CONNECT_CONCURRENCY", "Manager"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_CONNECT_CONCURRENCY = 16
START_SLACK_S = 15.0
"""Added to each wave of connects when bounding the start-up wait (handshake grace, closing a failed try)."""
LISTINGS = 4
STOP_WAIT_S = 30.0
"""Bound on a disable: the connection's own close is bounded (stdin closed, then signals to the group)."""
"""Requests a server's first listing makes (tools, resources, templates, prompts), each under its timeout."""


class Manager:
    """Every configured server, supervised, behind one index of canonical names.

    Args:
        config: the loaded configuration, or a sequence of server configs.
        settings: the settings when ``config`` is a sequence (defaults otherwise).
        callbacks: answers to server requests (sampling, elicitation, roots) and observers.
        catalog: the catalog cache: ``True`` for the default file, a path, a :class:`Catalog`, or
            ``False`` for none.
        start: ``True`` starts every enabled server (lazy ones only when the catalog has nothing for
            them); ``False`` starts none (calls start servers on demand); a set of names starts those.
        wait: wait in ``__aenter__`` until every started server has connected or failed once.
        connect_concurrency: how many servers connect at the same time.
        connection_factory: builds a server's :class:`Connection` (tests plug in here).
    """

    def __init__(
        self,
        config: Config | Sequence[ServerConfig],
        *,
        settings: Settings | None = None,
        callbacks: ClientCallbacks | None = None,
        catalog: Catalog | Path | bool = True,
        start: bool | Iterable[str] = True,
        wait: bool = True,
        connect_concurrency: int = DEFAULT_CONNECT_CONCURRENCY,
        connection_factory: ConnectionFactory | None = None,
    ) -> None:
        if isinstance(config, Config):
            self.config = config
        else:
            self.config = Config(servers=tuple(config), settings=settings or Settings())
        self.settings = self.config.settings
        self.registry = Registry()
        self.events = EventHub()
        self._user_callbacks = callbacks or ClientCallbacks()
        self._callbacks = self._wrap_callbacks(self._user_callbacks)
        self._catalog = _open_catalog(catalog)
        self._start = start if isinstance(start, bool) else frozenset(start)
        self._wait = wait
        self._connect_limiter = anyio.CapacityLimiter(connect_concurrency)
        self._transient_limiter = anyio.CapacityLimiter(self.settings.max_transient_servers)
        self._factory = connection_factory
        self._supervisors: dict[str, Supervisor] = {}
        self._start_disabled: dict[str, str] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Manager:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start supervising every configured server (see ``start`` and ``wait`` in the constructor)."""
        if self._tg is not None:
            raise RuntimeError("the manager is already started")
        if isinstance(self._start, frozenset):
            known = {s.name for s in self.config.servers}
            for name in sorted(self._start - known):
                raise ServerNotConfigured(name, sorted(known))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            started = [await self._supervise(server) for server in self.config.servers]
            if self._wait:
                await self._wait_for([s for s in started if s.wanted])
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close every connection (children are stopped and reaped) and end supervision."""
        tg, self._tg = self._tg, None
        for supervisor in self._supervisors.values():
            supervisor.stop()
        if tg is not None:
            # Shield the group's own scope (a new scope would break LIFO exit) so every supervisor
            # can close its connection and stop its child even when the caller is being cancelled.
            tg.cancel_scope.shield = True
            await tg.__aexit__(None, None, None)
        self.events.close()
        if self._catalog is not None:
            self._catalog.close()

    async def _supervise(self, server: ServerConfig) -> Supervisor:
        assert self._tg is not None
        # The transport reads a server's own sandbox block; merge the global one into it here.
        server = with_effective_sandbox(server, self.config.security)
        supervisor = Supervisor(
            server,
            self.settings,
            callbacks=self._callbacks,
            registry=self.registry,
            events=self.events,
            connect_limiter=self._connect_limiter,
            transient_limiter=self._transient_limiter,
            on_lists=self._store_lists,
            factory=self._factory,
        )
        self._supervisors[server.name] = supervisor
        self.registry.add_server(server.name, server.namespace, server.resources)
        remembered = self._start_disabled.pop(server.name, None)
        if remembered is not None:
            supervisor.disable(remembered)  # before its loop runs: it never connects
        if supervisor.disabled:
            await self._tg.start(supervisor.run)  # its loop says "disabled" before this returns
        else:
            # Not start(): the loop reads want() when it first runs, so nothing needs it running yet,
            # and a round trip through the event loop per server is saved.
            self._tg.start_soon(supervisor.run)
        if server.enabled and self._wants_start(server, self._load_cached(server)):
            supervisor.want()
        return supervisor

    def _wants_start(self, server: ServerConfig, cached: bool) -> bool:
        if self._start is False:
            return False
        if isinstance(self._start, frozenset):
            return server.name in self._start
        return not (server.starts_lazily(self.settings) and cached)

    async def _wait_for(self, supervisors: Sequence[Supervisor]) -> None:
        """Wait until each of ``supervisors`` (just asked to start) has finished its first attempt."""
        limit = self._start_wait_s(supervisors)
        with anyio.move_on_after(limit) as scope:
            for supervisor in supervisors:
                # 0: the count before the first attempt; one that already ended is not waited for.
                # One after the other in this task (not a task per server): all are waited for anyway.
                await supervisor.wait_attempt(0)
        if scope.cancelled_caught:
            # Each attempt bounds itself; this is the backstop. The host starts anyway: those servers
            # keep connecting in the background and a call waits for them.
            pending = sorted(s.name for s in supervisors if s.attempts == 0)
            logger.warning("servers still starting after %g s: %s", limit, ", ".join(pending))

    def _start_wait_s(self, supervisors: Sequence[Supervisor]) -> float:
        """How long all first attempts can take: connects queue in waves behind the connect limiter."""
        if not supervisors:
            return 0.0
        waves = math.ceil(len(supervisors) / max(int(self._connect_limiter.total_tokens), 1))
        connect = max(s.config.effective_connect_timeout_s(self.settings) for s in supervisors)
        listing = max(s.config.effective_timeout_s(self.settings) for s in supervisors)
        # Per wave a connect (with its grace and close); then the four listings of the last wave.
        return waves * (connect + START_SLACK_S) + LISTINGS * listing + START_SLACK_S

    # -- the catalog cache ---------------------------------------------------------------------

    def _load_cached(self, server: ServerConfig) -> bool:
        if self._catalog is None:
            return False
        entry = self._catalog.load(server.name, fingerprint(server))
        if entry is None:
            return False
        lists = ServerCatalog(
            tuple(entry.tools), tuple(entry.resources), tuple(entry.resource_templates), tuple(entry.prompts)
        )
        self.registry.update(server.name, lists)
        return True

    def _store_lists(self, server: ServerConfig, lists: ServerCatalog, connection: Connection) -> None:
        if self._catalog is None:
            return
        info = connection.info
        entry = CatalogEntry(
            tools=list(lists.tools),
            resources=list(lists.resources),
            resource_templates=list(lists.templates),
            prompts=list(lists.prompts),
            server_info=info.server_info,
            protocol_version=info.protocol_version,
            instructions=info.instructions,
            stored_at=time.time(),
        )
        self._catalog.store(server.name, fingerprint(server), entry)

    # -- the index ---------------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[ToolInfo]:
        """Every tool (of ``server`` if given) under its canonical name, including the synthetic
        ``server:read_resource`` and ``server:get_prompt``."""
        return self.registry.tools(server)

    def resources(self, server: str | None = None) -> list[ResourceInfo]:
        """Every resource and resource template (of ``server`` if given)."""
        return self.registry.resources(server)

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """Every prompt (of ``server`` if given) under its canonical name."""
        return self.registry.prompts(server)

    @property
    def servers(self) -> list[str]:
        """The names of the supervised servers, in configuration order."""
        return list(self._supervisors)

    def supervisor(self, name: str) -> Supervisor:
        """The supervisor of server ``name``.

        Raises:
            ServerNotConfigured: no such server.
        """
        supervisor = self._supervisors.get(name)
        if supervisor is None:
            raise ServerNotConfigured(name, list(self._supervisors))
        return supervisor

    # -- calls ---------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str | ToolInfo,
        arguments: JSONObject | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call the tool with canonical ``name`` on its server (starting the server if needed).

        A result with ``isError`` is returned, not raised. No policy applies here: this is the
        unguarded path (see :class:`mcpmux.Host` for the one with allow/deny, approval and audit).

        Raises:
            ToolNotFound: no such tool (the closest names are suggested).
            ServerUnavailable: the server is disabled or its circuit is open.
            MCPTimeoutError, TransportError, ServerError: as :meth:`Connection.call_tool`.
        """
        tool = self.fresh(name) if isinstance(name, ToolInfo) else self.resolve_tool(name)
        return await self.call_resolved(tool, arguments, timeout=timeout, on_progress=on_progress)

    async def call_resolved(
        self,
        tool: ToolInfo,
        arguments: JSONObject | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call ``tool`` (from :meth:`resolve_tool` or :meth:`tools`) without resolving its name again.

        The synthetic ``server:read_resource`` and ``server:get_prompt`` are answered here, their
        results given as tool results (the one adapter between the two shapes).
        """
        supervisor = self.supervisor(tool.server)
        arguments = arguments or {}
        if not tool.synthetic:
            # The hot path: _on_live_session inlined (no closure, no context manager, no frame per layer).
            if not supervisor.take_slot():
                await supervisor.queue_for_slot()
            try:
                connection = supervisor.live_connection() or await supervisor.connection_for_call()
                try:
                    return await connection.call_tool(tool.tool, arguments, timeout=timeout, on_progress=on_progress)
                except SessionExpired:
                    logger.info("server %r: session expired; sending again on a new session", supervisor.name)
                connection = await supervisor.connection_for_call()
                return await connection.call_tool(tool.tool, arguments, timeout=timeout, on_progress=on_progress)
            finally:
                supervisor.release_slot()

        async def send(connection: Connection) -> types.CallToolResult:
            if tool.synthetic and tool.tool == READ_RESOURCE:
                result = await connection.read_resource(str(arguments.get("uri", "")), timeout=timeout)
                return _resource_as_tool_result(result)
            if tool.synthetic and tool.tool == GET_PROMPT:
                prompt_args = {k: str(v) for k, v in (arguments.get("arguments") or {}).items()}
                prompt = await connection.get_prompt(str(arguments.get("name", "")), prompt_args, timeout=timeout)
                return _prompt_as_tool_result(prompt)
            return await connection.call_tool(tool.tool, arguments, timeout=timeout, on_progress=on_progress)

        return await _on_live_session(supervisor, send)

    def fresh(self, tool: ToolInfo) -> ToolInfo:
        """``tool`` if it is still the index's entry for its name, else the entry now (looked up again).

        A face resolves a name once and hands the :class:`ToolInfo` down; if the server re-listed
        in between, the policy must judge the definition the server has now, not the one listed.
        """
        return tool if self.registry.current(tool) else self.resolve_tool(tool.name)

    def resolve_tool(self, name: str) -> ToolInfo:
        """The tool with canonical ``name``.

        Raises:
            ToolNotFound: no such tool (the closest names are suggested).
            ServerUnavailable: the name's namespace belongs to a server whose tools are unknown
                (it never listed, e.g. it failed to start): the reason is its failure.
            ServerDisabled: the name's namespace belongs to a disabled server.
        """
        try:
            return self.registry.resolve_tool(name)
        except ToolNotFound:
            # Only to explain the failure better: the namespace of a server that never listed.
            namespace = name.partition(":")[0]
            for supervisor in self._supervisors.values():
                if supervisor.config.namespace == namespace and supervisor.disabled:
                    raise ServerDisabled(supervisor.name, supervisor.disabled_reason) from None
                if supervisor.config.namespace == namespace and self.registry.catalog(supervisor.name) is None:
                    cause = supervisor.last_error
                    unavailable = ServerUnavailable(
                        supervisor.name, f"its tools are unknown: {cause or supervisor.reason}"
                    )
                    if cause is not None and cause.hint:
                        unavailable.hint = cause.hint  # what fixes the cause fixes this
                    raise unavailable from None
            raise

    async def resolve_tool_waiting(self, name: str) -> ToolInfo:
        """:meth:`resolve_tool`, except that the name of a server still making its first connection (no tools
        listed yet, no failure, not disabled) waits for it, bounded by the server's connect timeout: a call
        made in the first seconds after a host starts finds the tool instead of "its tools are unknown".

        Raises:
            As :meth:`resolve_tool`, after the wait (a failed start is the reason given).
        """
        try:
            return self.resolve_tool(name)
        except ServerUnavailable:
            connecting = self._first_connecting(name.partition(":")[0])
            if connecting is None:
                raise
        with suppress(MCPMuxError):  # a failed start: resolve_tool below gives it as the reason
            await connecting.connection_for_call()
        return self.resolve_tool(name)

    def _first_connecting(self, namespace: str) -> Supervisor | None:
        """The supervisor of ``namespace`` whose tools are unknown only because it has not connected yet."""
        for supervisor in self._supervisors.values():
            if (
                supervisor.config.namespace == namespace
                and not supervisor.disabled
                and supervisor.last_error is None
                and self.registry.catalog(supervisor.name) is None
            ):
                return supervisor
        return None

    async def read_resource(self, server: str, uri: str, *, timeout: float | None = None) -> types.ReadResourceResult:
        """Read ``uri`` from ``server``."""
        supervisor = self.supervisor(server)
        return await _on_live_session(supervisor, lambda connection: connection.read_resource(uri, timeout=timeout))

    async def list_skills(self, server: str, *, timeout: float | None = None) -> list[SkillEntry]:
        """The skills ``server`` lists (``skills/list``; empty when it does not declare the extension).
        Reads none of their files."""
        supervisor = self.supervisor(server)
        return await _on_live_session(supervisor, lambda connection: connection.list_skills(timeout=timeout))

    async def get_prompt(
        self, name: str | PromptInfo, arguments: dict[str, str] | None = None, *, timeout: float | None = None
    ) -> types.GetPromptResult:
        """Render the prompt with canonical ``name`` (or the :class:`PromptInfo` already resolved)."""
        prompt = self.registry.resolve_prompt(name) if isinstance(name, str) else name
        supervisor = self.supervisor(prompt.server)
        return await _on_live_session(
            supervisor, lambda connection: connection.get_prompt(prompt.prompt, arguments, timeout=timeout)
        )

    def resolve_prompt(self, name: str) -> PromptInfo:
        """The prompt with canonical ``name`` (raises :class:`ToolNotFound` with the closest names)."""
        return self.registry.resolve_prompt(name)

    async def complete(
        self,
        server: str,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: dict[str, str],
        context: dict[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Completions of one argument of a prompt or resource template of ``server``.

        ``ref`` names the prompt as the server knows it (not the canonical name).
        """
        return await _on_live_session(
            self.supervisor(server), lambda connection: connection.complete(ref, argument, context, timeout=timeout)
        )

    async def subscribe_resource(self, server: str, uri: str, *, timeout: float | None = None) -> None:
        """Ask ``server`` for update notifications about ``uri`` (connecting it if needed)."""
        await _on_live_session(
            self.supervisor(server), lambda connection: connection.subscribe_resource(uri, timeout=timeout)
        )

    async def unsubscribe_resource(self, server: str, uri: str, *, timeout: float | None = None) -> bool:
        """Drop a subscription to ``uri`` if ``server`` is connected (a closed session has none); say if sent."""
        connection = self.supervisor(server).connection
        if connection is None or not connection.is_connected:
            return False
        await connection.unsubscribe_resource(uri, timeout=timeout)
        return True

    def takes_log_level(self, server: str) -> bool:
        """Whether ``server`` is connected, logs, and speaks an era that has ``logging/setLevel``.

        The 2026-07-28 protocol has no ``logging/setLevel``: such a server is left as it is.
        """
        info = self.server_info(server)
        return info is not None and bool(info.capabilities.logging) and info.protocol_version not in MODERN_ERA

    async def set_logging_level(self, server: str, level: types.LoggingLevel, *, timeout: float | None = None) -> bool:
        """Set ``server``'s log level if it :meth:`takes_log_level`; say whether the request was sent."""
        connection = self.supervisor(server).connection
        if connection is None or not self.takes_log_level(server):
            return False
        await connection.set_logging_level(level, timeout=timeout)
        return True

    # -- what the servers said about themselves --------------------------------------------------

    def server_info(self, name: str) -> ConnectionInfo | None:
        """What ``name`` said when it connected (capabilities, instructions...), while it is connected."""
        connection = self.supervisor(name).connection
        return connection.info if connection is not None and connection.is_connected else None

    def list_hint(self, name: str, method: str) -> tuple[int, bool] | None:
        """The cache hint of ``name``'s last ``method`` listing: ``(ttlMs, private)``, or ``None`` without one.

        Only 2026-07-28 servers give hints; the others announce changes with ``list_changed``.
        """
        connection = self.supervisor(name).connection
        if connection is None or method not in connection.list_ttl_ms:
            return None
        return connection.list_ttl_ms[method], method in connection.list_private

    def stderr_tail(self, name: str) -> str | None:
        """The last lines ``name`` wrote to stderr (stdio servers), while its connection is open."""
        connection = self.supervisor(name).connection
        return connection.stderr_tail() if connection is not None else None

    def last_error(self, name: str) -> MCPMuxError | None:
        """The error of ``name``'s last failed attempt, if any (with its hint)."""
        return self.supervisor(name).last_error

    def capabilities(self, servers: Iterable[str] | None = None) -> types.ServerCapabilities:
        """The union of the capabilities of the connected servers (of ``servers`` if given).

        Prompts and resources count as offered when the index holds any (from the catalog too).
        """
        names = list(self._supervisors) if servers is None else list(servers)
        merged: JSONObject = {}
        for name in names:
            info = self.server_info(name)
            if info is not None:
                for key, value in info.capabilities.model_dump(exclude_none=True).items():
                    merged[key] = _merge_capability(merged.get(key), value)
        if any(self.registry.prompts(name) for name in names):
            merged.setdefault("prompts", {})
        if any(self.registry.resources(name) for name in names):
            merged.setdefault("resources", {})
        return types.ServerCapabilities.model_validate(merged)

    def pending(self) -> list[str]:
        """The servers asked to start whose first connect attempt has not ended yet."""
        return [s.name for s in self._supervisors.values() if s.wanted and s.attempts == 0]

    async def wait_started(self) -> None:
        """Wait until every server asked to start has connected or failed once (no bound: callers set one)."""
        for supervisor in [s for s in self._supervisors.values() if s.wanted]:
            await supervisor.wait_attempt(0)  # in turn, in this task: every one is waited for anyway

    # -- management ----------------------------------------------------------------------------

    def status(self) -> list[ServerStatus]:
        """The state of every server, in configuration order."""
        return [_status(s, len(self.registry.tools(s.name))) for s in self._supervisors.values()]

    async def add_server(self, server: ServerConfig, *, start: bool = True) -> None:
        """Supervise one more server (and connect it unless ``start=False``).

        Raises:
            ConfigError: a server with that name exists.
        """
        if server.name in self._supervisors:
            problem = ConfigProblem("<manager>", "", f"a server named {server.name!r} already exists")
            raise ConfigError(problem)
        self.config = self.config.model_copy(update={"servers": (*self.config.servers, server)})
        supervisor = await self._supervise(server)
        if start and server.enabled:
            supervisor.want()
            await self._wait_for([supervisor])

    async def remove_server(self, name: str) -> None:
        """Stop supervising ``name``: close its connection and drop its tools."""
        supervisor = self.supervisor(name)
        supervisor.stop()
        with anyio.fail_after(15):
            while supervisor.state not in (ServerState.CONFIGURED, ServerState.DISABLED) or supervisor.connection:
                await supervisor.wait_attempt()
        del self._supervisors[name]
        self.registry.remove_server(name)
        self.config = self.config.model_copy(
            update={"servers": tuple(s for s in self.config.servers if s.name != name)}
        )

    async def restart(self, name: str) -> None:
        """Close and reconnect ``name``; wait for the new attempt.

        Raises:
            ServerDisabled: the server is disabled (enable it instead).
        """
        supervisor = self.supervisor(name)
        if supervisor.disabled:
            raise ServerDisabled(name, supervisor.disabled_reason)
        mark = supervisor.attempts
        supervisor.restart()
        with anyio.move_on_after(self._start_wait_s([supervisor])):
            await supervisor.wait_attempt(mark)

    def start_disabled(self, name: str, reason: str) -> None:
        """Before :meth:`start`: keep ``name`` disabled from the outset (a disable remembered from an
        earlier run); it never starts until :meth:`enable`.

        Raises:
            ServerNotConfigured: no such server.
            RuntimeError: the manager has started.
        """
        if self._tg is not None:
            raise RuntimeError("start_disabled() is for servers not started yet: use disable()")
        if all(s.name != name for s in self.config.servers):
            raise ServerNotConfigured(name, [s.name for s in self.config.servers])
        self._start_disabled[name] = reason

    async def disable(self, name: str, reason: str = "disabled at run time") -> bool:
        """Stop ``name`` and keep it stopped until :meth:`enable`: its child is reaped, its tools,
        resources and prompts leave the index (listeners get ``ListChanged``), its calls fail with
        :class:`~mcpmux.errors.ServerDisabled`. Return whether it was enabled.

        Kept in memory only: the configuration file is not touched, and a new manager starts the
        servers its configuration enables.

        Raises:
            ServerNotConfigured: no such server.
        """
        supervisor = self.supervisor(name)
        changed = supervisor.disable(reason)
        with anyio.fail_after(STOP_WAIT_S):
            await supervisor.wait_disabled()
        return changed

    async def enable(self, name: str) -> bool:
        """Enable ``name`` again (or for the first time, when its configuration disables it) and
        start it; wait for its first attempt like :meth:`restart`. Return whether it was disabled.

        Raises:
            ServerNotConfigured: no such server.
        """
        supervisor = self.supervisor(name)
        mark = supervisor.attempts
        if not supervisor.enable():
            return False
        supervisor.want()
        with anyio.move_on_after(self._start_wait_s([supervisor])):
            await supervisor.wait_attempt(mark)
        return True

    async def refresh(self, name: str | None = None) -> None:
        """Connect (if needed) and re-list ``name`` (or every enabled server), storing the fresh lists.

        Raises:
            the connection error of a named server that cannot be reached.
        """
        targets = [self.supervisor(name)] if name else [s for s in self._supervisors.values() if not s.disabled]
        errors: list[MCPMuxError] = []

        async def one(supervisor: Supervisor) -> None:
            try:
                await supervisor.relist()
            except MCPMuxError as exc:  # collected: one server's failure must not stop the others' refresh
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for supervisor in targets:
                tg.start_soon(one, supervisor)
        if name and errors:
            raise errors[0]

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        """Events (``StateChanged``, ``ListChanged``) as they happen."""
        async with self.events.subscribe() as stream:
            yield stream

    # -- callbacks -----------------------------------------------------------------------------

    def _wrap_callbacks(self, user: ClientCallbacks) -> ClientCallbacks:
        async def on_list_changed(server: str, kind: ListKind) -> None:
            supervisor = self._supervisors.get(server)
            if supervisor is not None:
                supervisor.notify_list_changed(kind)
            if user.on_list_changed is not None:
                await user.on_list_changed(server, kind)

        return ClientCallbacks(
            sampling=user.sampling,
            elicitation=user.elicitation,
            roots=user.roots,
            on_log=user.on_log,
            on_list_changed=on_list_changed,
            on_resource_updated=user.on_resource_updated,
            on_progress=user.on_progress,
        )


async def _on_live_session(supervisor: Supervisor, send: Callable[[Connection], Awaitable[_T]]) -> _T:
    """Run ``send`` on the server's live connection in one of its call slots.

    A Streamable HTTP server that forgot our session (it restarted) refused the request unseen;
    the spec's answer is a new session: the supervisor opens one and the request goes once more.
    """
    if not supervisor.take_slot():
        await supervisor.queue_for_slot()
    try:
        connection = supervisor.live_connection() or await supervisor.connection_for_call()
        try:
            return await send(connection)
        except SessionExpired:
            logger.info("server %r: session expired; sending again on a new session", supervisor.name)
        return await send(await supervisor.connection_for_call())
    finally:
        supervisor.release_slot()


def _open_catalog(catalog: Catalog | Path | bool) -> Catalog | None:
    if catalog is False:
        return None
    if catalog is True:
        return Catalog()
    if isinstance(catalog, Path):
        return Catalog(catalog)
    return catalog


def _status(supervisor: Supervisor, tools: int) -> ServerStatus:
    connection = supervisor.connection
    info = connection.info if connection is not None else None
    peer = info.server_info if info is not None else None
    target, pid = supervisor.describe_target(), info.pid if info is not None else None
    shown = server_pid(pid)  # the server's own process, not the reaper that runs it
    if pid is not None and shown != pid and target.startswith(f"pid {pid}:"):
        target = f"pid {shown}:{target.removeprefix(f'pid {pid}:')}"
    return ServerStatus(
        name=supervisor.name,
        type=supervisor.config.type,
        state=supervisor.state,
        reason=supervisor.reason,
        target=target,
        pid=shown,
        tools=tools,
        restarts=supervisor.restarts,
        last_error=str(supervisor.last_error) if supervisor.last_error is not None else None,
        protocol_version=info.protocol_version if info is not None else None,
        server_info=f"{peer.name} {peer.version}" if peer is not None else None,
        history=tuple(supervisor.history),
    )


def _merge_capability(old: Any, new: Any) -> Any:
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _merge_capability(old.get(k), new.get(k)) for k in old.keys() | new.keys()}
    if isinstance(old, bool) or isinstance(new, bool):
        return bool(old) or bool(new)
    return new if old is None else old


def _resource_as_tool_result(result: types.ReadResourceResult) -> types.CallToolResult:
    blocks: list[types.ContentBlock] = [types.EmbeddedResource(type="resource", resource=c) for c in result.contents]
    return types.CallToolResult(content=blocks)


def _prompt_as_tool_result(result: types.GetPromptResult) -> types.CallToolResult:
    lines = [f"# {result.description}"] if result.description else []
    for message in result.messages:
        content = message.content
        text = content.text if isinstance(content, types.TextContent) else f"[{content.type}]"
        lines.append(f"{message.role}: {text}")
    return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(lines))])
