"""A :class:`~mcpmux.testing.MockServer` as the SDK's low-level server, with its failures and era.

:class:`MockRuntime` is an SDK :class:`~mcp.server.Server` whose handlers answer from the mock.
Every stream transport (memory, stdio, tcp, websocket, SSE) serves a session by calling
:meth:`MockRuntime.run`, which puts :class:`EraGate` between the transport and the SDK: it
refuses the era the mock does not serve (as a server of the other era would), rewrites the
``initialize`` answer's protocol version (drift) and a garbage answer. Streamable HTTP has no
stream per session; :mod:`mcpmux.testing.http` applies the same gate to each POST.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from mcpmux.testing.failures import Crash, Delay, Error, Failure, GarbageOutput, Hang, HugeResult, ListChangedAfter
from mcpmux.testing.spec import Call, MockSpec, MockTool

if TYPE_CHECKING:
    # Types only: a mock run as a child never loads mcpmux's transports (about 70 ms a start).
    from mcpmux.transports.base import ReadStream, WriteStream

__all__ = ["GARBAGE_RESULT", "EraGate", "MockRuntime", "ToolContext"]

logger = logging.getLogger(__name__)

MB = 1024 * 1024
GARBAGE_RESULT: dict[str, Any] = {"content": "this is not a list of content blocks (mock garbage_output)"}
# The spec's code for an unknown resource (mcp_types names no constant for it).
RESOURCE_NOT_FOUND = -32002
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
Crasher = Callable[[Crash], Awaitable[None]]
Observer = Callable[[Call], None]
_Answer = TypeVar("_Answer", bound=BaseModel)


@dataclass(frozen=True)
class ToolContext:
    """What a mock tool's handler gets in a parameter named ``ctx``: its request, in either era.

    ::

        async def review(text: str, ctx: ToolContext) -> object:
            await ctx.report_progress(1, 2)
            answer = await ctx.ask("llm", types.CreateMessageRequest(params=...), types.CreateMessageResult)
            if isinstance(answer, types.InputRequiredResult):
                return answer          # the stateless era: the client answers with its retry
            return answer.content.text

    Attributes:
        request: the SDK's request context (session, request id, negotiated version).
        params: the ``tools/call`` parameters (the stateless era's ``inputResponses`` among them).
        mock: the mock being served (a handler may change its tools).
        bus: where stateless-era change events go (to ``subscriptions/listen`` streams).
        subscribed: the URIs handshake-era clients subscribed to (``resources/subscribe``).
    """

    request: ServerRequestContext[Any]
    params: types.CallToolRequestParams
    mock: MockSpec
    bus: SubscriptionBus
    subscribed: set[str]

    @property
    def stateless(self) -> bool:
        """Whether the call came in the 2026-07-28 stateless era (no server->client requests)."""
        return self.request.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` for this call (if its client asked for progress)."""
        await self.request.session.report_progress(progress, total, message)

    async def ask(
        self, key: str, request: types.InputRequest, result: type[_Answer]
    ) -> _Answer | types.InputRequiredResult:
        """Put ``request`` (sampling, elicitation) to the client, as its era allows.

        Handshake era: a request on the call's channel, and its answer. Stateless era: the answer
        the client's retry brought under ``key``, or the ``input_required`` result to return so
        that it asks (SEP-2322).
        """
        if not self.stateless:
            metadata = ServerMessageMetadata(related_request_id=self.request.request_id)
            return await self.request.session.send_request(request, result, metadata=metadata)
        answer = (self.params.input_responses or {}).get(key)
        if answer is None:
            return types.InputRequiredResult(input_requests={key: request}, request_state=f"mock:{key}")
        return result.model_validate(answer.model_dump(by_alias=True, exclude_none=True))

    async def send_tool_list_changed(self) -> None:
        """Announce a changed tool list: on the session (handshake era) and to ``subscriptions/listen`` streams."""
        await self.bus.publish(ToolsListChanged())
        if not self.stateless:
            await self.request.session.send_tool_list_changed()

    async def send_resource_updated(self, uri: str) -> None:
        """Announce that ``uri`` changed to whoever subscribed: on the session (handshake era), or listens."""
        await self.bus.publish(ResourceUpdated(uri=uri))
        if not self.stateless and uri in self.subscribed:
            await self.request.session.send_resource_updated(uri)


class MockRuntime(Server[Any]):
    """The SDK server that serves ``mock``.

    Args:
        mock: what to serve; its tool list is read at each request, so changes show at once.
        on_crash: what a :class:`Crash` does here (exit the process, drop the sessions).
        on_garbage: writes a raw non-JSON line where the transport allows (a child's stdout).
        on_call: sees each call (a child writes it to its call log).
        apply_startup: whether each session plays the mock's :class:`Startup` (delay, exit); a
            child process plays it once itself, before it serves.
    """

    def __init__(
        self,
        mock: MockSpec,
        *,
        on_crash: Crasher | None = None,
        on_garbage: Callable[[], None] | None = None,
        on_call: Observer | None = None,
        apply_startup: bool = True,
    ) -> None:
        self.bus = InMemorySubscriptionBus()
        """Change events for stateless-era clients' ``subscriptions/listen`` streams."""
        super().__init__(
            mock.name,
            on_subscriptions_listen=ListenHandler(self.bus),
            version=mock.version,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_completion=self._complete if mock.completer is not None else None,
        )
        self.mock = mock
        self.subscribed: set[str] = set()
        """The resource URIs a client subscribed to (handshake era) and did not unsubscribe from."""
        self.garbage_ids: set[types.RequestId] = set()
        self._on_crash = on_crash or self.drop_sessions
        self._on_garbage = on_garbage
        self._on_call = on_call
        self._apply_startup = apply_startup
        self._sessions: set[anyio.CancelScope] = set()

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # A mock's tool list changes (list_changed_after): say so in its capabilities.
        options = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(options, experimental_capabilities, extensions)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if not self.mock.subscribable and capabilities.resources is not None:
            resources = capabilities.resources.model_copy(update={"subscribe": False})
            capabilities = capabilities.model_copy(update={"resources": resources})
        return capabilities

    # -- sessions --------------------------------------------------------------------------------

    async def run(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
        initialization_options: InitializationOptions,
        raise_exceptions: bool = False,
    ) -> None:
        """Serve one session through the era gate; a crash ends it (its streams close)."""
        if self._apply_startup and not await self._start_session():
            with anyio.CancelScope(shield=True):
                await read_stream.aclose()
                await write_stream.aclose()
            return
        gate = EraGate(self)
        to_server, from_gate = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        with anyio.CancelScope() as scope:
            self._sessions.add(scope)
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(gate.pump, read_stream, to_server, write_stream)
                    write = _RewritingWrite(write_stream, gate)
                    await super().run(from_gate, write, initialization_options, raise_exceptions)
                    tg.cancel_scope.cancel()
            finally:
                self._sessions.discard(scope)
                to_server.close()
                from_gate.close()
                # Ours to close: the SDK's SSE transport leaves the session's read stream open.
                with anyio.CancelScope(shield=True):
                    await read_stream.aclose()
        if scope.cancelled_caught:
            await write_stream.aclose()

    async def _start_session(self) -> bool:
        """Play the mock's startup for a session: wait its delay; ``False`` when it must not be served."""
        startup = self.mock.startup
        if startup.delay > 0:
            await anyio.sleep(startup.delay)
        if startup.exit_code is not None:
            name, code = self.mock.name, startup.exit_code
            logger.info("mock %r refuses to start (exit code %d): %s", name, code, startup.stderr)
            return False
        return True

    def set_crash_hook(self, on_crash: Crasher) -> None:
        """Make a :class:`Crash` call ``on_crash`` (the HTTP face restarts its server)."""
        self._on_crash = on_crash

    async def drop_sessions(self, crash: Crash) -> None:
        """End every open session at once, as if the server process died (the default crash)."""
        logger.info("mock %r crashes: dropping %d session(s)", self.mock.name, len(self._sessions))
        for scope in list(self._sessions):
            scope.cancel()

    # -- handlers ----------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.definition() for tool in self.mock.tools.values()])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = self.mock.tools.get(params.name)
        if tool is None:
            known = ", ".join(sorted(self.mock.tools))
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r} (this mock has: {known})")
        call = Call(tool.name, dict(params.arguments or {}), time.time(), ctx.protocol_version)
        self.mock.record(call)
        if self._on_call is not None:
            self._on_call(call)
        for failure in (*tool.failures, *self.mock.failures):
            result = await self._fail(failure, tool, ctx)
            if result is not None:
                return result
        if self.mock.book is not None:
            return types.CallToolResult.model_validate(self.mock.book.answer("tools/call", tool.name, call.arguments))
        return await tool.answer(call.arguments, self._context(ctx, params))

    def _context(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> ToolContext:
        return ToolContext(ctx, params, self.mock, self.bus, self.subscribed)

    async def _fail(
        self, failure: Failure, tool: MockTool, ctx: ServerRequestContext[Any]
    ) -> types.CallToolResult | None:
        match failure:
            case Delay(seconds=seconds):
                await anyio.sleep(seconds)
            case Hang():
                await anyio.sleep_forever()
            case Crash():
                await self._on_crash(failure)
                await anyio.sleep_forever()
            case Error(code=code, message=message):
                raise MCPError(code, message)
            case GarbageOutput():
                if self._on_garbage is not None:
                    self._on_garbage()
                if ctx.request_id is not None:
                    self.garbage_ids.add(ctx.request_id)
                return types.CallToolResult(content=[])
            case HugeResult(mb=mb):
                return types.CallToolResult(content=[types.TextContent(text="x" * int(mb * MB))])
            case ListChangedAfter(n=n):
                await self._maybe_change(n, tool, failure in self.mock.failures, ctx)
        return None

    async def _maybe_change(self, n: int, tool: MockTool, everywhere: bool, ctx: ServerRequestContext[Any]) -> None:
        made = self.mock.count(None if everywhere else tool.name)
        added = f"added_after_{n}"
        if made != n or added in self.mock.tools:
            return
        self.mock.tool(added, result="added", description=f"A tool the mock added after {n} calls.")
        try:
            await self._context(ctx, types.CallToolRequestParams(name=tool.name)).send_tool_list_changed()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, MCPError) as exc:
            logger.warning("mock %r could not announce its changed tool list: %r", self.mock.name, exc)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = [
            types.Resource(uri=r.uri, name=r.name, mime_type=r.mime_type) for r in self.mock.resources.values()
        ]
        return types.ListResourcesResult(resources=[*resources, *self.mock.listed_resources])

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        if not self.mock.subscribable:
            raise MCPError(types.METHOD_NOT_FOUND, f"Method not found: resources/subscribe (mock {self.mock.name!r})")
        self.subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscribed.discard(str(params.uri))
        return types.EmptyResult()

    async def _list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=list(self.mock.templates))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        resource = self.mock.resources.get(str(params.uri))
        if resource is None and self.mock.book is not None:
            return types.ReadResourceResult.model_validate(self.mock.book.answer("resources/read", str(params.uri), {}))
        if resource is None:
            read = await self._read_template(str(params.uri))
            if read is not None:
                return read
        if resource is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"no resource {params.uri!r} in mock {self.mock.name!r}")
        return types.ReadResourceResult(contents=[resource.contents(str(params.uri))])

    async def _read_template(self, uri: str) -> types.ReadResourceResult | None:
        """``uri`` read by the first template with a handler whose pattern it matches, if any."""
        for template, handler in self.mock.template_readers:
            variables = _match_template(template.uri_template, uri)
            if variables is None:
                continue
            value = handler(**variables)
            if inspect.isawaitable(value):
                value = await value
            if isinstance(value, bytes):
                blob = base64.b64encode(value).decode()
                contents: types.TextResourceContents | types.BlobResourceContents = types.BlobResourceContents(
                    uri=uri, mime_type=template.mime_type, blob=blob
                )
            else:
                contents = types.TextResourceContents(uri=uri, mime_type=template.mime_type, text=str(value))
            return types.ReadResourceResult(contents=[contents])
        return None

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        assert self.mock.completer is not None
        values = self.mock.completer(params.ref, params.argument.name, params.argument.value)
        if inspect.isawaitable(values):
            values = await values
        return types.CompleteResult(completion=types.Completion(values=[str(value) for value in values]))

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompts = [
            types.Prompt(
                name=p.name,
                description=p.description,
                arguments=[types.PromptArgument(name=a, required=True) for a in p.arguments],
            )
            for p in self.mock.prompts.values()
        ]
        return types.ListPromptsResult(prompts=[*prompts, *self.mock.listed_prompts])

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        prompt = self.mock.prompts.get(params.name)
        if prompt is None and self.mock.book is not None:
            answer = self.mock.book.answer("prompts/get", params.name, params.arguments or {})
            return types.GetPromptResult.model_validate(answer)
        if prompt is None:
            raise MCPError(types.INVALID_PARAMS, f"no prompt {params.name!r} in mock {self.mock.name!r}")
        return prompt.render(params.arguments or {})


class EraGate:
    """Between a transport and the SDK server: the mock's era, protocol version drift and garbage.

    - era ``2025-11-25``: ``server/discover`` and requests carrying the 2026-07-28 envelope are
      answered -32601 (method not found), as a server that predates that era answers them;
    - era ``2026-07-28``: ``initialize`` is answered -32022 naming the versions served, as the
      SDK's stateless servers answer it;
    - ``protocol_version(v)``: the ``initialize`` result claims ``v``;
    - a garbage call's response carries :data:`GARBAGE_RESULT` instead of its result.
    """

    def __init__(self, runtime: MockRuntime) -> None:
        self.runtime = runtime
        self._initialize_ids: set[types.RequestId] = set()

    def refusal(self, message: types.JSONRPCMessage) -> types.JSONRPCError | types.JSONRPCResponse | None:
        """The answer this gate gives ``message`` instead of passing it on, if any."""
        if not isinstance(message, types.JSONRPCRequest):
            return None
        era = self.runtime.mock.served_era
        params = message.params or {}
        if era == LEGACY and (message.method == "server/discover" or _is_modern(params)):
            error = types.ErrorData(code=types.METHOD_NOT_FOUND, message=f"Method not found: {message.method}")
            return types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        if era == MODERN and message.method == "initialize":
            return self._modern_initialize(message.id, params.get("protocolVersion"))
        if message.method == "initialize":
            self._initialize_ids.add(message.id)
        return None

    def _modern_initialize(
        self, request_id: types.RequestId, requested: object
    ) -> types.JSONRPCError | types.JSONRPCResponse:
        """How a 2026-07-28-only server answers ``initialize`` (the mock's ``initialize_answer``)."""
        mock = self.runtime.mock
        if mock.initialize_answer == "claim":
            info = {"name": mock.name, "version": mock.version}
            result = {"protocolVersion": MODERN, "capabilities": {"tools": {}}, "serverInfo": info}
            return types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        if mock.initialize_answer == "-32020":
            error = types.ErrorData(code=-32020, message="Missing MCP-Protocol-Version header")
        elif mock.initialize_answer == "-32601":
            error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found: initialize")
        else:
            data = {"supported": [MODERN], "requested": requested}
            text = "this server speaks only the 2026-07-28 protocol; the initialize handshake is not accepted"
            error = types.ErrorData(code=types.UNSUPPORTED_PROTOCOL_VERSION, message=text, data=data)
        return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)

    def rewrite(self, message: types.JSONRPCMessage) -> types.JSONRPCMessage:
        """``message`` as the server should send it (drifted version, garbage result)."""
        if not isinstance(message, types.JSONRPCResponse):
            return message
        drift = self.runtime.mock.answered_version
        if message.id in self._initialize_ids and drift is not None:
            self._initialize_ids.discard(message.id)
            return message.model_copy(update={"result": {**message.result, "protocolVersion": drift}})
        if message.id in self.runtime.garbage_ids:
            self.runtime.garbage_ids.discard(message.id)
            return message.model_copy(update={"result": dict(GARBAGE_RESULT)})
        return message

    async def pump(
        self,
        read: ReadStream[SessionMessage | Exception],
        to_server: MemoryObjectSendStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
    ) -> None:
        """Pass the transport's messages on to the server, answering refused ones here."""
        with to_server:
            async for item in read:
                if isinstance(item, SessionMessage):
                    refused = self.refusal(item.message)
                    if refused is not None:
                        await write.send(SessionMessage(refused))
                        continue
                await to_server.send(item)


def _match_template(uri_template: str, uri: str) -> dict[str, str] | None:
    """The variables of ``uri_template`` (simple ``{name}`` expansions, one path segment each) in ``uri``."""
    pattern = "".join(
        f"(?P<{piece[1:-1]}>[^/]+)" if piece.startswith("{") else re.escape(piece)
        for piece in re.split(r"(\{[A-Za-z_][A-Za-z0-9_]*\})", uri_template)
    )
    found = re.fullmatch(pattern, uri)
    return found.groupdict() if found else None


def _is_modern(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, Mapping) and types.PROTOCOL_VERSION_META_KEY in meta


class _RewritingWrite:
    """The server's write stream with the gate's rewrites applied."""

    def __init__(self, inner: WriteStream[SessionMessage], gate: EraGate) -> None:
        self.inner, self.gate = inner, gate

    async def send(self, item: SessionMessage) -> None:
        rewritten = self.gate.rewrite(item.message)
        if rewritten is not item.message:
            item = SessionMessage(rewritten, metadata=item.metadata)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _RewritingWrite:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def dumps(message: types.JSONRPCMessage) -> str:
    """``message`` as one JSON text (wire names)."""
    return json.dumps(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
