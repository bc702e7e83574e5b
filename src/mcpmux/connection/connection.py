"""One live server: open its transport, negotiate the era, and make deadline-bound requests.

A :class:`Connection` enters the transport and the SDK session in the task that connects it (no
task of its own: their task groups run the readers); requests are sent from the caller's task.
Every request has a deadline (the server's ``timeout_ms`` unless the call gives one); a deadline or
a caller's cancellation sends ``notifications/cancelled``. Foreign errors are mapped here (STYLE 6):
JSON-RPC errors to :class:`ServerError`, deadlines to :class:`MCPTimeoutError`, a lost transport to
the evidence it left (``ServerExited``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType
from typing import Final, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.dispatcher import ProgressFnT

from mcpmux._private.mcp_sdk import run_input_required_driver
from mcpmux.config.models import ServerConfig, Settings
from mcpmux.connection import skills
from mcpmux.connection._dispatch import WatchedDispatcher
from mcpmux.connection._era import is_modern, negotiate
from mcpmux.connection._errormap import FOREIGN_ERRORS
from mcpmux.connection._evidence import Evidence
from mcpmux.connection._lean import LeanPath, lean_enabled
from mcpmux.connection._listen import FIRST_LISTEN_TIMEOUT_S, Listener
from mcpmux.connection._routing import build_hooks
from mcpmux.connection._streams import StreamWatch
from mcpmux.connection.info import ConnectionInfo
from mcpmux.errors import MCPMuxError, MCPTimeoutError, ProtocolError, ServerError, TransportError
from mcpmux.transports.base import TransportStreams
from mcpmux.types.callbacks import ClientCallbacks
from mcpmux.types.json_shapes import JSONObject

__all__ = ["CLIENT_INFO", "CLOSE_TIMEOUT_S", "MAX_PAGES", "Connection", "TransportFactory"]

logger = logging.getLogger(__name__)

MAX_PAGES: Final = 100
"""Pages followed per listing; a server that pages on past this is broken, not big."""

_T = TypeVar("_T")
_Item = TypeVar("_Item")
_Page = TypeVar("_Page", bound=types.PaginatedResult)

CLIENT_INFO: Final = types.Implementation(name="mcpmux", version="0.1.0")
CLOSE_TIMEOUT_S: Final = 10.0
CONNECT_GRACE_S: Final = 0.5
WRITE_GRACE_S: Final = 1.0
"""How long after a call's deadline a request still stuck in its write (a child not reading) is given up."""

TransportFactory = Callable[[], AbstractAsyncContextManager[TransportStreams]]
"""Opens the transport of one server; the default is ``mcpmux.transports.open_transport``."""


class Connection:
    """A live connection to one configured server.

    Use as ``async with Connection(server, settings) as conn:``, or call :meth:`connect` and
    :meth:`close` from one task (they enter and leave the transport's and the session's task groups).

    Args:
        server: the server's configuration.
        settings: the global settings (timeouts and limits the server inherits).
        callbacks: answers to server requests and observers of notifications.
        transport: opens the transport; ``open_transport(server, settings)`` by default.
        client_info: the name and version this client gives the server.
        lean: send ``tools/call`` and ``resources/read`` on the transport's direct path where it
            has one (stdio, 2024-2025 eras; see :mod:`mcpmux.connection._lean`); ``None``: unless
            ``MCPMUX_LEAN_PATH=0``.
    """

    def __init__(
        self,
        server: ServerConfig,
        settings: Settings,
        *,
        callbacks: ClientCallbacks | None = None,
        transport: TransportFactory | None = None,
        client_info: types.Implementation | None = None,
        lean: bool | None = None,
    ) -> None:
        self.name = server.name
        self.timeout_s = server.effective_timeout_s(settings)
        self._session: ClientSession | None = None
        self._evidence = Evidence(server.name)
        self._listed: set[str] = set()
        self._unimplemented: set[str] = set()
        """Optional methods the server answered with -32601 (method not found): not asked again."""
        self.list_ttl_ms: dict[str, int] = {}
        """The ``ttlMs`` cache hint of the last listing per method (2026-07-28 era; smallest page's)."""
        self.list_private: set[str] = set()
        """The methods whose last listing said ``cacheScope: private`` on any page (2026-07-28 era)."""
        self.server = server
        self.settings = settings
        self.callbacks = callbacks or ClientCallbacks()
        self._transport = transport or self._default_transport
        self._client_info = client_info or CLIENT_INFO
        self._stack: AsyncExitStack | None = None
        """The transport, the session (and a stateless-era listener), entered by :meth:`connect`."""
        self._scope: anyio.CancelScope | None = None
        """The connection's outermost scope: bounds the opening, then shields and bounds :meth:`close`."""
        self._dispatcher: WatchedDispatcher | None = None
        self._info: ConnectionInfo | None = None
        self._listener: Listener | None = None
        """The stateless era's ``subscriptions/listen`` stream (list changes, resource updates)."""
        self._lean_wanted = lean_enabled() if lean is None else lean
        self._lean: LeanPath | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Connection:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> ConnectionInfo:
        """Open the transport and negotiate, within the server's connect timeout.

        Raises:
            MCPTimeoutError: no usable session within the connect timeout.
            ServerExited: the child exited before the session was ready (beats a timeout).
            TransportError: the transport could not be opened.
            ProtocolVersionMismatch: no protocol version both sides speak.
            ServerError: the server rejected the handshake.
        """
        if self._stack is not None:
            raise RuntimeError(f"connection to {self.name!r} was already opened")
        limit = self.server.effective_connect_timeout_s(self.settings)
        started, deadline = time.perf_counter(), anyio.current_time() + limit
        self._stack = stack = AsyncExitStack()
        # Bounds opening the transport; a grace later than the handshake's own deadline, so a child
        # that died meanwhile is still there to ask. Lifted after the handshake: the session lives on.
        self._scope = scope = stack.enter_context(anyio.CancelScope(deadline=deadline + CONNECT_GRACE_S))
        try:
            failure, info = await self._open(stack, scope, started, deadline, limit)
        except BaseException as exc:
            self._stack = None
            try:
                timed_out = await self._leave(stack, scope, exc)
            except BaseExceptionGroup as group:
                raise _single_leaf(group)  # noqa: B904 -- the leaf keeps its own cause
            if timed_out:
                raise MCPTimeoutError(self.name, "connect", limit) from None
            raise
        if failure is not None or info is None:
            try:
                await self.close()
            except BaseExceptionGroup as group:
                raise _single_leaf(group)  # noqa: B904 -- the leaf keeps its own cause
            raise failure or MCPTimeoutError(self.name, "connect", limit)
        self._info = info
        return info

    async def close(self) -> None:
        """End the session and close the transport (stopping a child); bounded, idempotent."""
        self._evidence.closing = True
        stack, self._stack = self._stack, None
        if stack is None:
            return
        scope = self._scope
        assert scope is not None, "entered with the stack"
        await self._leave(stack, scope, None)
        if scope.cancelled_caught:
            logger.warning("closing server %r took longer than %g s", self.name, CLOSE_TIMEOUT_S)

    async def _leave(self, stack: AsyncExitStack, scope: anyio.CancelScope, exc: BaseException | None) -> bool:
        """Leave what :meth:`connect` entered, with ``exc`` if it failed; whether ``scope`` caught its own timeout.

        The connection's own scope (a new one would break LIFO exit): shielded from an outer
        cancellation so the transport can stop its child, and bounded in case it cannot.
        """
        scope.shield = True
        scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S
        if exc is None:
            await stack.aclose()
            return False
        return bool(await stack.__aexit__(type(exc), exc, exc.__traceback__))

    async def _open(
        self, stack: AsyncExitStack, scope: anyio.CancelScope, started: float, deadline: float, limit: float
    ) -> tuple[Exception | None, ConnectionInfo | None]:
        """Open the transport and the session into ``stack``, negotiate; the handshake's failure, or the info."""
        streams = await stack.enter_async_context(self._transport())
        watch = StreamWatch(self.name, streams)
        self._evidence.streams, self._evidence.watch, opened = streams, watch, time.perf_counter()
        direct = streams.direct if self._lean_wanted else None
        self._dispatcher = WatchedDispatcher(
            watch, self._evidence.record, on_end=direct.close if direct is not None else None, name=self.name
        )
        session = await stack.enter_async_context(self._new_session(self._dispatcher))
        # Failures are returned, not raised: raised inside, the task groups entered would wrap them.
        failure = await self._handshake(session, deadline, limit)
        # Past the handshake, the transport's own teardown must not be cut short.
        scope.deadline = math.inf
        if scope.cancel_called:
            return failure, None  # the opening's deadline passed meanwhile
        if failure is not None:
            return failure, None
        self._session = session
        version = session.protocol_version
        if direct is not None and version is not None and not is_modern(version):
            self._lean = LeanPath(self.name, direct, self._evidence, version)
        if is_modern(version):
            await self._listen(stack, session)
        return None, self._describe(session, streams, opened - started, opened)

    async def _listen(self, stack: AsyncExitStack, session: ClientSession) -> None:
        """Start listening for a stateless-era session's changes (stopped by :meth:`close`).

        The connection is reported ready once its first ``subscriptions/listen`` stream is open
        (bounded), so no change after connect is missed.
        """
        self._listener = Listener(self.name, session)
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tg.cancel_scope.cancel)  # left before the task group: the listener stops
        tg.start_soon(self._listener.run)
        with anyio.move_on_after(FIRST_LISTEN_TIMEOUT_S) as waited:
            await self._listener.first_opened()
        if waited.cancelled_caught:
            logger.warning(
                "server %r: no subscriptions/listen acknowledgment in %g s", self.name, FIRST_LISTEN_TIMEOUT_S
            )

    async def _handshake(self, session: ClientSession, deadline: float, limit: float) -> Exception | None:
        """Negotiate by ``deadline``; return the error that prevented it, if any."""
        with anyio.CancelScope(deadline=deadline) as scope:
            try:
                await negotiate(session, self.name, self.server.protocol)
            except MCPMuxError as exc:
                return exc
            except FOREIGN_ERRORS as exc:
                mapped = self._evidence.mapped("initialize", exc, limit, 0)
                mapped.__cause__ = exc
                return mapped
        if scope.cancelled_caught:
            # Evidence beats a timeout: a child that died meanwhile says why.
            return self._evidence.of_end("during the handshake") or MCPTimeoutError(self.name, "connect", limit)
        return None

    def _new_session(self, dispatcher: WatchedDispatcher) -> ClientSession:
        hooks = build_hooks(self.name, self.callbacks)
        return ClientSession(
            sampling_callback=hooks.sampling,
            elicitation_callback=hooks.elicitation,
            list_roots_callback=hooks.roots,
            message_handler=hooks.message_handler,
            client_info=self._client_info,
            dispatcher=dispatcher,
        )

    def _describe(
        self, session: ClientSession, streams: TransportStreams, transport_s: float, t0: float
    ) -> ConnectionInfo:
        return ConnectionInfo(
            server_info=session.server_info,
            protocol_version=session.protocol_version or "",
            capabilities=session.server_capabilities or types.ServerCapabilities(),
            instructions=session.instructions,
            describe=streams.describe,
            pid=streams.pid,
            transport_s=transport_s,
            handshake_s=time.perf_counter() - t0,
        )

    def _default_transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        from mcpmux.transports import open_transport

        return open_transport(self.server, self.settings)

    # -- state ---------------------------------------------------------------------------------

    @property
    def info(self) -> ConnectionInfo:
        """What the server said at connect time.

        Raises:
            RuntimeError: not connected yet.
        """
        if self._info is None:
            raise RuntimeError(f"connection to {self.name!r} is not open")
        return self._info

    @property
    def notifications_dropped(self) -> int:
        """Log and progress notifications of this session dropped because too many were being handled at
        once (:class:`~mcpmux.connection._dispatch.NotificationGate`): a flood never starves an answer."""
        return 0 if self._dispatcher is None else sum(self._dispatcher.gate.dropped.values())

    @property
    def is_connected(self) -> bool:
        """Whether the session is up and its transport has not ended."""
        return self._info is not None and self._dispatcher is not None and not self._dispatcher.ended.is_set()

    async def wait_closed(self) -> TransportError | None:
        """Wait until the transport ends (or the connection is closed); return what ended it, if it said."""
        dispatcher = self._dispatcher
        if dispatcher is not None:
            await dispatcher.ended.wait()
        return self.closed_reason()

    def when_closed(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Have ``callback`` called once the transport ends (at once if it has, or was never opened);
        return a function that forgets it.

        For a waiter that waits for something else too: one event that either sets, where a
        cancel scope around :meth:`wait_closed` would cost a cancellation to stop waiting.
        """
        dispatcher = self._dispatcher
        if dispatcher is None:
            callback()
            return lambda: None
        return dispatcher.when_ended(callback)

    def closed_reason(self) -> TransportError | None:
        """What ended the transport, if it said (meaningful once it has ended: see :meth:`when_closed`)."""
        return self._evidence.of_end("")

    def stderr_tail(self) -> str:
        """The last stderr output of a stdio child (empty for network transports)."""
        return self._evidence.stderr_tail()

    # -- requests ------------------------------------------------------------------------------

    async def call(self, method: str, timeout: float | None, send: Callable[[ClientSession], Awaitable[_T]]) -> _T:
        """Run ``send`` on the session under one deadline, mapping every foreign error.

        The escape hatch for what the typed methods do not cover, e.g.
        ``await conn.call("resources/unsubscribe", None, lambda s: s.send_request(...))``.

        Raises:
            MCPTimeoutError: the deadline passed (``notifications/cancelled`` was sent).
            ServerError: the server answered with a JSON-RPC error.
            ServerExited, ConnectionClosed: the transport ended while waiting.
            ProtocolError: the server's answer broke the protocol.
        """
        session = self._live_session()
        limit = self.timeout_s if timeout is None else timeout
        statuses = self._evidence.statuses
        try:
            with anyio.fail_after(limit):
                return await send(session)
        except MCPMuxError:
            raise
        except TimeoutError as exc:
            raise MCPTimeoutError(self.name, method, limit) from exc
        except FOREIGN_ERRORS as exc:
            raise self._evidence.mapped(method, exc, limit, statuses) from exc

    async def request(
        self, method: str, params: JSONObject | None = None, *, timeout: float | None = None
    ) -> JSONObject:
        """Send any request, typed methods or not (an extension's ``x/method``, ``ping``), and return the
        server's raw ``result`` (with ``resultType``, ``complete`` unless the server said otherwise): what
        mcpmux does not wrap, under the connection's deadline and errors.

        Raises:
            MCPTimeoutError: the deadline passed (``notifications/cancelled`` was sent).
            ServerError: the server answered with a JSON-RPC error (``code``/``data`` kept).
            ServerExited, ConnectionClosed: the transport ended while waiting.
        """
        dispatcher = self._live_dispatcher()
        return await self.call(method, timeout, lambda _session: dispatcher.send_raw_request(method, params))

    async def notify(self, method: str, params: JSONObject | None = None) -> None:
        """Send any notification (``notifications/...``), in order with the requests sent before and after.

        Raises:
            ServerExited, ConnectionClosed: the transport has ended.
        """
        dispatcher = self._live_dispatcher()
        await self.call(method, None, lambda _session: dispatcher.notify(method, params))

    def _live_dispatcher(self) -> WatchedDispatcher:
        self._live_session()
        if self._dispatcher is None:
            raise self._evidence.lost("before the session was ready")
        return self._dispatcher

    def _live_session(self) -> ClientSession:
        if self._session is None:
            raise self._evidence.lost("before the session was ready")
        return self._session

    @property
    def session(self) -> ClientSession:
        """The SDK session, for what this class does not wrap.

        Raises:
            RuntimeError: not connected.
        """
        if self._session is None:
            raise RuntimeError(f"connection to {self.name!r} is not open")
        return self._session

    @property
    def lean_path(self) -> bool:
        """Whether ``tools/call`` and ``resources/read`` take the lean path (stdio, 2024-2025 eras).

        See :mod:`mcpmux.connection._lean`; ``MCPMUX_LEAN_PATH=0`` or ``lean=False`` switch it off.
        """
        return self._lean is not None

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version, or ``None`` before connecting."""
        return self._session.protocol_version if self._session is not None else None

    # -- lists ----------------------------------------------------------------------------------

    async def list_tools(self, *, timeout: float | None = None) -> list[types.Tool]:
        """Every tool of the server, all pages (empty if it has no tools capability)."""
        if not self._offers("tools"):
            return []
        tools = await self._collect("tools/list", timeout, lambda s, p: s.list_tools(params=p), _tools)
        self._listed.update(tool.name for tool in tools)
        return tools

    async def list_resources(self, *, timeout: float | None = None) -> list[types.Resource]:
        """Every resource of the server, all pages (empty without a resources capability)."""
        if not self._offers("resources"):
            return []
        return await self._collect("resources/list", timeout, lambda s, p: s.list_resources(params=p), _resources)

    async def list_resource_templates(self, *, timeout: float | None = None) -> list[types.ResourceTemplate]:
        """Every resource template of the server, all pages (empty without a resources capability)."""
        if not self._offers("resources"):
            return []
        return await self._collect(
            "resources/templates/list", timeout, lambda s, p: s.list_resource_templates(params=p), _templates
        )

    async def list_prompts(self, *, timeout: float | None = None) -> list[types.Prompt]:
        """Every prompt of the server, all pages (empty without a prompts capability)."""
        if not self._offers("prompts"):
            return []
        return await self._collect("prompts/list", timeout, lambda s, p: s.list_prompts(params=p), _prompts)

    def offers_skills(self) -> bool:
        """Whether the server declares the skills extension (``io.modelcontextprotocol/skills``)."""
        return skills.offers_skills(self.session.server_capabilities)

    async def list_skills(self, *, timeout: float | None = None) -> list[skills.SkillEntry]:
        """Every skill the server lists (``skills/list``, all pages); empty without the extension.

        Lists only: no skill file is read until :meth:`load_skill` (the extension's no-prefetch rule).
        """
        if not self.offers_skills():
            return []

        def fetch(
            session: ClientSession, params: types.PaginatedRequestParams | None
        ) -> Awaitable[skills.ListSkillsResult]:
            return session.send_request(skills.ListSkillsRequest(params=params), skills.ListSkillsResult)

        return await self._collect(skills.LIST_METHOD, timeout, fetch, _skills)

    async def load_skill(self, entry: skills.SkillEntry, *, timeout: float | None = None) -> skills.LoadedSkill:
        """Read ``entry``'s files, each checked against the entry (see :func:`mcpmux.connection.skills.load_skill`).

        Raises:
            SkillRejected: a file does not match its entry; the rest of the skill is not read.
        """
        return await skills.load_skill(self.name, entry, lambda uri: self.read_resource(uri, timeout=timeout))

    def _offers(self, capability: str) -> bool:
        capabilities = self.session.server_capabilities
        return capabilities is None or getattr(capabilities, capability, None) is not None

    async def _collect(
        self,
        method: str,
        timeout: float | None,
        fetch: Callable[[ClientSession, types.PaginatedRequestParams | None], Awaitable[_Page]],
        items: Callable[[_Page], Sequence[_Item]],
    ) -> list[_Item]:
        """Every page of ``method``; a server that does not implement it (-32601) has nothing to list."""

        async def walk(session: ClientSession) -> list[_Item]:
            collected: list[_Item] = []
            cursor: str | None = None
            seen: set[str] = set()
            ttls: list[int] = []
            private = False
            for _ in range(MAX_PAGES):
                page = await fetch(session, None if cursor is None else types.PaginatedRequestParams(cursor=cursor))
                collected.extend(items(page))
                ttls.append(getattr(page, "ttl_ms", 0))
                private = private or getattr(page, "cache_scope", "private") == "private"
                cursor = page.next_cursor
                if cursor is None:
                    if is_modern(session.protocol_version):
                        self.list_ttl_ms[method] = min(ttls)
                        (self.list_private.add if private else self.list_private.discard)(method)
                    return collected
                if cursor in seen:
                    raise ProtocolError(self.name, f"{method} repeated the cursor {cursor!r}")
                seen.add(cursor)
            raise ProtocolError(self.name, f"{method} did not end after {MAX_PAGES} pages")

        return await self._optional(method, timeout, walk, list)

    async def _optional(
        self,
        method: str,
        timeout: float | None,
        send: Callable[[ClientSession], Awaitable[_T]],
        absent: Callable[[], _T],
    ) -> _T:
        """``call``, except that a method the server does not implement yields ``absent()``.

        Servers built on the SDK 1.x low-level API (``mcp-server-sqlite``, ``server-postgres``)
        advertise ``resources`` and answer ``resources/templates/list`` with -32601: an optional
        method missing is an empty answer, never a failure of the server.
        """
        if method in self._unimplemented:
            return absent()
        try:
            return await self.call(method, timeout, send)
        except ServerError as exc:
            if exc.code != types.METHOD_NOT_FOUND:
                raise
            self._unimplemented.add(method)
            logger.debug("server %r does not implement %s (%s): treated as empty", self.name, method, exc.error_message)
            return absent()

    # -- calls ----------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: JSONObject | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call a tool; a result with ``isError`` is returned, not raised (see ``raise_for_tool_error``).

        Raises:
            MCPTimeoutError: the deadline passed; the server was sent ``notifications/cancelled``.
            ServerError: the server rejected the call (unknown tool, invalid arguments, ...).
            ServerExited, ConnectionClosed: the transport ended during the call.
        """
        limit = self.timeout_s if timeout is None else timeout
        lean = self._lean
        if lean is not None and on_progress is None and type(arguments) in _ARGUMENTS:
            # The lean path (stdio, 2024-2025 eras); a call with progress keeps the SDK's routing.
            return await self._call_lean(lean, name, arguments, limit)
        if name in self._listed and not is_modern(self.protocol_version):
            # The SDK's own deadline (it sends notifications/cancelled) covers waiting for the answer,
            # not writing the request: a child that stops reading stdin would hold the write forever.
            # An outer deadline a moment later bounds that. Only for listed tools: for others the SDK
            # lists first, which the deadline must cover (the general path below).
            session, statuses = self._live_session(), self._evidence.statuses
            try:
                with anyio.fail_after(limit + WRITE_GRACE_S):
                    return await session.call_tool(name, arguments, limit, on_progress)
            except TimeoutError as exc:
                raise MCPTimeoutError(self.name, "tools/call", limit) from exc
            except FOREIGN_ERRORS as exc:
                raise self._evidence.mapped("tools/call", exc, limit, statuses) from exc
        if not is_modern(self.protocol_version):
            result = await self.call("tools/call", limit, lambda s: s.call_tool(name, arguments, None, on_progress))
            self._listed.add(name)  # the SDK has listed the tools by now
            return result
        return await self.call("tools/call", limit, lambda s: _call_tool_modern(s, name, arguments, on_progress))

    async def _call_lean(
        self, lean: LeanPath, name: str, arguments: JSONObject | None, limit: float
    ) -> types.CallToolResult:
        """``tools/call`` on the lean path, then the SDK's check of its structured content.

        As in the SDK's ``call_tool``: a successful result is checked against the tool's output
        schema, and a tool never listed makes the session list the tools first, within the deadline.
        """
        started = time.monotonic()
        result = await lean.call_tool(name, arguments, limit)
        if result.is_error:
            return result
        session = self._live_session()
        try:
            if name in self._listed:
                await session.validate_tool_result(name, result)
                return result
            with anyio.fail_after(max(limit - (time.monotonic() - started), 0)):
                await session.validate_tool_result(name, result)
        except MCPMuxError:
            raise
        except TimeoutError as exc:
            raise MCPTimeoutError(self.name, "tools/call", limit) from exc
        except FOREIGN_ERRORS as exc:
            raise self._evidence.mapped("tools/call", exc, limit, self._evidence.statuses) from exc
        self._listed.add(name)  # the session has listed the tools by now
        return result

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> types.ReadResourceResult:
        """Read one resource (a concrete URI, e.g. from a template)."""
        lean = self._lean
        if lean is not None:
            return await lean.read_resource(uri, self.timeout_s if timeout is None else timeout)

        async def send(session: ClientSession) -> types.ReadResourceResult:
            async def attempt(
                r: types.InputResponses | None, s: str | None
            ) -> types.ReadResourceResult | types.InputRequiredResult:
                return await session.read_resource(uri, input_responses=r, request_state=s, allow_input_required=True)

            return await _drive(session, await attempt(None, None), attempt)

        return await self.call("resources/read", timeout, send)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, *, timeout: float | None = None
    ) -> types.GetPromptResult:
        """Render a prompt with ``arguments``."""

        async def send(session: ClientSession) -> types.GetPromptResult:
            async def attempt(
                r: types.InputResponses | None, s: str | None
            ) -> types.GetPromptResult | types.InputRequiredResult:
                return await session.get_prompt(
                    name, arguments, input_responses=r, request_state=s, allow_input_required=True
                )

            return await _drive(session, await attempt(None, None), attempt)

        return await self.call("prompts/get", timeout, send)

    async def complete(
        self,
        ref: types.ResourceTemplateReference | types.PromptReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> types.CompleteResult:
        """Ask for completions of one argument (``{"name": ..., "value": ...}``) of a prompt or template.

        A server that does not implement completion (-32601) offers no completions: the result is empty.
        """
        return await self._optional(
            "completion/complete", timeout, lambda s: s.complete(ref, argument, context_arguments), _no_completions
        )

    async def ping(self, *, timeout: float | None = None) -> None:
        """Check the server answers (``ping``; ``server/discover`` in the 2026 era, which has no ping)."""

        async def send(session: ClientSession) -> None:
            version = session.protocol_version
            if is_modern(version) and version is not None:
                await session.send_discover(version)
            else:
                await session.send_ping()

        await self.call("ping", timeout, send)

    async def set_logging_level(self, level: types.LoggingLevel, *, timeout: float | None = None) -> None:
        """Ask the server to send log messages at ``level`` and above (2025 era only).

        A server that does not implement logging (-32601) is left as it is: a no-op, logged at DEBUG.

        Raises:
            ProtocolError: the connection is in the 2026 era, which has no ``logging/setLevel``.
        """
        if is_modern(self.protocol_version):
            raise ProtocolError(self.name, "logging/setLevel does not exist in the 2026-07-28 protocol")
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
        await self._optional(
            "logging/setLevel", timeout, lambda s: s.send_request(request, types.EmptyResult), types.EmptyResult
        )

    async def subscribe_resource(self, uri: str, *, timeout: float | None = None) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri``.

        The 2026-07-28 era has no ``resources/subscribe``: ``uri`` joins the connection's
        ``subscriptions/listen`` filter instead, and its updates reach the same callback.

        Raises:
            ProtocolError: a stateless-era server that offers no subscriptions, or refused them.
        """
        listener = self._listener
        if listener is not None and is_modern(self.protocol_version):
            await self.call("subscriptions/listen", timeout, lambda s: listener.subscribe(uri))
            return
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
        await self.call("resources/subscribe", timeout, lambda s: s.send_request(request, types.EmptyResult))

    async def unsubscribe_resource(self, uri: str, *, timeout: float | None = None) -> None:
        """Stop ``notifications/resources/updated`` about ``uri`` (a stateless-era one: drop it from the filter)."""
        listener = self._listener
        if listener is not None and is_modern(self.protocol_version):
            await self.call("subscriptions/listen", timeout, lambda s: listener.unsubscribe(uri))
            return
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        await self.call("resources/unsubscribe", timeout, lambda s: s.send_request(request, types.EmptyResult))


_ARGUMENTS: Final = (dict, type(None))
"""Argument types the lean path sends as they are (others go through the SDK's validation)."""


def _single_leaf(exc: BaseException) -> BaseException:
    """The one mcpmux error inside nested exception groups (a transport's task groups wrap), else ``exc``."""
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, MCPMuxError) else exc


async def _call_tool_modern(
    session: ClientSession, name: str, arguments: JSONObject | None, on_progress: ProgressFnT | None
) -> types.CallToolResult:
    async def attempt(
        r: types.InputResponses | None, s: str | None
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await session.call_tool(
            name,
            arguments,
            progress_callback=on_progress,
            input_responses=r,
            request_state=s,
            allow_input_required=True,
        )

    return await _drive(session, await attempt(None, None), attempt)


async def _drive(
    session: ClientSession,
    first: _T | types.InputRequiredResult,
    retry: Callable[[types.InputResponses | None, str | None], Awaitable[_T | types.InputRequiredResult]],
) -> _T:
    if not isinstance(first, types.InputRequiredResult):
        return first

    async def dispatch(key: str, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        meta = request.params.meta if request.params else None
        return await session.dispatch_input_request(
            ClientRequestContext(session=session, request_id=key, meta=meta), request
        )

    return await run_input_required_driver(first, dispatch=dispatch, retry=retry)


def _no_completions() -> types.CompleteResult:
    return types.CompleteResult(completion=types.Completion(values=[]))


def _tools(page: types.ListToolsResult) -> list[types.Tool]:
    return page.tools


def _resources(page: types.ListResourcesResult) -> list[types.Resource]:
    return page.resources


def _templates(page: types.ListResourceTemplatesResult) -> list[types.ResourceTemplate]:
    return page.resource_templates


def _skills(page: skills.ListSkillsResult) -> list[skills.SkillEntry]:
    return page.skills


def _prompts(page: types.ListPromptsResult) -> list[types.Prompt]:
    return page.prompts
