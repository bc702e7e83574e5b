"""The typed MCP requests of a connection: lists followed to the last page, calls, reads, prompts.

Each method goes through :meth:`Requests.call` (one deadline, one error mapping), except the hot
``tools/call`` of a listed tool, which inlines it. On a 2026-07-28
connection a server asks for input (sampling, elicitation, roots) by answering ``InputRequiredResult``;
the SDK's driver answers it through the same callbacks and retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, TypeVar

import anyio
import mcp_types as types

# The SDK's own SEP-2322 driver, the one mcp.Client uses (a private module; mcp is pinned <3).
from mcp.client._input_required import run_input_required_driver
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.dispatcher import ProgressFnT

from mcpmux.connection._era import is_modern
from mcpmux.connection._errormap import FOREIGN_ERRORS
from mcpmux.connection._evidence import Evidence
from mcpmux.errors import MCPMuxError, MCPTimeoutError, ProtocolError, ServerError
from mcpmux.json_shapes import JSONObject

__all__ = ["MAX_PAGES", "Requests"]

logger = logging.getLogger(__name__)

MAX_PAGES: Final = 100
"""Pages followed per listing; a server that pages on past this is broken, not big."""

_T = TypeVar("_T")
_Item = TypeVar("_Item")
_Page = TypeVar("_Page", bound=types.PaginatedResult)


class Requests:
    """The typed request methods over a session that ``Connection`` opens and sets."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self.timeout_s = timeout_s
        self._session: ClientSession | None = None
        self._evidence = Evidence(name)
        self._listed: set[str] = set()
        self._unimplemented: set[str] = set()
        """Optional methods the server answered with -32601 (method not found): not asked again."""
        self.list_ttl_ms: dict[str, int] = {}
        """The ``ttlMs`` cache hint of the last listing per method (2026-07-28 era; smallest page's)."""

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
            for _ in range(MAX_PAGES):
                page = await fetch(session, None if cursor is None else types.PaginatedRequestParams(cursor=cursor))
                collected.extend(items(page))
                ttls.append(getattr(page, "ttl_ms", 0))
                cursor = page.next_cursor
                if cursor is None:
                    if is_modern(session.protocol_version):
                        self.list_ttl_ms[method] = min(ttls)
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
        if name in self._listed and not is_modern(self.protocol_version):
            # The hot path, inlined: the deadline rides on the SDK request (no cancel scope, no extra
            # frame). Only for listed tools: for others the SDK lists first, which the deadline must cover.
            session, statuses = self._live_session(), self._evidence.statuses
            try:
                return await session.call_tool(name, arguments, limit, on_progress)
            except FOREIGN_ERRORS as exc:
                raise self._evidence.mapped("tools/call", exc, limit, statuses) from exc
        if not is_modern(self.protocol_version):
            result = await self.call("tools/call", limit, lambda s: s.call_tool(name, arguments, None, on_progress))
            self._listed.add(name)  # the SDK has listed the tools by now
            return result
        return await self.call("tools/call", limit, lambda s: _call_tool_modern(s, name, arguments, on_progress))

    async def read_resource(self, uri: str, *, timeout: float | None = None) -> types.ReadResourceResult:
        """Read one resource (a concrete URI, e.g. from a template)."""

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
        """Ask for ``notifications/resources/updated`` about ``uri`` (2025 era)."""
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
        await self.call("resources/subscribe", timeout, lambda s: s.send_request(request, types.EmptyResult))

    async def unsubscribe_resource(self, uri: str, *, timeout: float | None = None) -> None:
        """Stop ``notifications/resources/updated`` about ``uri`` (2025 era)."""
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        await self.call("resources/unsubscribe", timeout, lambda s: s.send_request(request, types.EmptyResult))


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


def _prompts(page: types.ListPromptsResult) -> list[types.Prompt]:
    return page.prompts
