"""Direct tool calls: a 2025-era HTTP client's ``tools/call`` handed straight to the gateway's handler.

On the SDK's path a call POSTed to the gateway crosses the session's JSON-RPC machinery: a memory
stream into the session's dispatcher, a task of its own, the server runner (the request validated
twice, a context and a session object built, the middleware chain), the result validated and
dumped again, then another memory stream and the transport's message router back to the POST.
A proxied call cost 1.78 M instructions on that path and 1.30 M as a direct call (callgrind, the
gateway process; 1.16 M once its answer's lock and the relay's context manager were made cheap).

:class:`DirectCall` does the runner's part for one ``tools/call`` in the POST's own task, with
the same steps and outcomes: the params checked against the client's protocol revision and
parsed (a request that fails either takes the SDK's path, which answers it), a request context
whose session is the SDK's :class:`~mcp.server.session.ServerSession` over the session's real
:class:`~mcp.server.connection.Connection` (client info, capabilities, protocol version) and a
request-scoped channel of this module, the gateway's own ``tools/call`` handler, the result
dumped and sieved by the revision's wire model as the runner does, exceptions mapped as the
dispatcher maps them, and a call the client cancels answered ``-32800`` as the SDK's 2025-era
transport answers it.

Only calls that cannot need the session's back channel go this way (:func:`direct_params`): the
client declared neither sampling nor elicitation (so no question can be put to it: an approval
it may not give is refused or held for a person exactly as before), it asked for no progress,
and the call carries no ``requestState`` (the stateless era's boundary). Notifications the call
sends on its own stream (an upstream's log lines) reach it as before: the channel puts them on
the request's stream, and the transport turns the answer into an SSE stream as for any call.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.transport_context import TransportContext
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json
from starlette.requests import Request

__all__ = ["Answer", "CallHandler", "DirectCall", "direct_params"]

logger = logging.getLogger(__name__)

CallHandler = Callable[
    [ServerRequestContext[Any, Any], types.CallToolRequestParams],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]
"""The gateway's ``tools/call`` handler (:meth:`mcpmux.gateway.server.Gateway.call_tool`)."""


class Answer(Protocol):
    """Where a direct call's messages go: the answer to its POST (:class:`mcpmux.gateway.responses.Reply`)."""

    async def put(self, message: bytes, *, final: bool) -> None:
        """Send a JSON-RPC message of the call: notifications while it runs, then its answer (``final``)."""
        ...

    async def fail(self) -> None:
        """End the answer without the call's result: the session was terminated while the call ran."""
        ...


_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
# A client with either capability may be asked something mid-call: its calls keep the SDK's path.
_ASKABLE = (
    types.ClientCapabilities(sampling=types.SamplingCapability()),
    types.ClientCapabilities(elicitation=types.ElicitationCapability()),
)


def direct_params(connection: Connection, params: Mapping[str, Any] | None) -> types.CallToolRequestParams | None:
    """The parsed params of a ``tools/call`` that may be served directly, or ``None`` for the SDK's path.

    The runner's two checks, in its order: the params against the negotiated revision's wire
    model, then the call's own model. A failure of either leaves the request to the SDK, which
    answers it with its own error.
    """
    version = connection.protocol_version
    if version in MODERN_PROTOCOL_VERSIONS or not connection.initialize_accepted or params is None:
        return None
    if any(connection.check_capability(askable) for askable in _ASKABLE):
        return None
    meta = params.get("_meta")
    if isinstance(meta, Mapping) and meta.get("progressToken") is not None:
        return None
    if params.get("requestState") is not None or params.get("inputResponses") is not None:
        return None
    try:
        methods.validate_client_request("tools/call", version, params)
        return types.CallToolRequestParams.model_validate(params, by_name=False)
    except (KeyError, ValueError, ValidationError):
        return None


class DirectCall:
    """One ``tools/call`` served in its POST's task; it also is the request's channel to the client.

    Args:
        request_id: the JSON-RPC id of the call.
        raw: its params as they came.
        params: the same, parsed (:func:`direct_params`).
        connection: the session's connection (whose ``initialize`` the SDK accepted).
        request: the HTTP request that carried the call (the caller's token, for the audit).
        answer: where the call's messages go: notifications while it runs, then its answer.
    """

    def __init__(
        self,
        request_id: types.RequestId,
        raw: Mapping[str, Any],
        params: types.CallToolRequestParams,
        connection: Connection,
        request: Request,
        answer: Answer,
    ) -> None:
        self._id, self._params, self._answer_to = request_id, params, answer
        self._version = connection.protocol_version
        self._scope = anyio.CancelScope()
        self._cancelled = self._closed = self._terminated = False
        self._cancel_requested: anyio.Event | None = None
        session = ServerSession(self, connection, request_meta=params.meta)
        self._ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=session,
            lifespan_context={},
            protocol_version=self._version,
            method="tools/call",
            params=raw,
            request_id=request_id,
            meta=params.meta,
            request=request,
        )

    # -- the call -------------------------------------------------------------------------------

    async def run(self, handler: CallHandler) -> None:
        """Run ``handler`` and answer the call (in the caller's task: no task of its own)."""
        answer = None
        with self._scope:
            answer = await self._answer(handler)
        self._closed = True
        if self._terminated:
            await self._answer_to.fail()
            return
        if answer is None or self._cancelled:
            # Answered as the SDK's 2025-era transport answers a request cancelled by its client.
            answer = self._error(types.ErrorData(code=REQUEST_CANCELLED, message="Request cancelled"))
        await self._answer_to.put(answer, final=True)

    async def _answer(self, handler: CallHandler) -> bytes:
        """The call's JSON-RPC answer: its result, or the error the SDK's dispatcher would give."""
        try:
            result = await handler(self._ctx, self._params)
            return b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (to_json(self._id), to_json(self._wire(result)))
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                # As the SDK's dispatcher answers an unexpected failure of a handler (code 0, its text).
                logger.exception("handler for 'tools/call' raised")
                error = types.ErrorData(code=0, message=str(exc))
            return self._error(error)

    def _error(self, error: types.ErrorData) -> bytes:
        return (
            types.JSONRPCError(jsonrpc="2.0", id=self._id, error=error)
            .model_dump_json(by_alias=True, exclude_unset=True)
            .encode()
        )

    def _wire(self, result: BaseModel) -> dict[str, Any]:
        """``result`` as the runner shapes it: dumped, then sieved by the revision's wire model."""
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            return methods.serialize_server_result("tools/call", self._version, dumped)
        except ValidationError:
            logger.exception("handler for 'tools/call' returned an invalid result")
            raise MCPError(code=types.INTERNAL_ERROR, message="Handler returned an invalid result") from None

    def cancel(self) -> None:
        """The client cancelled the call (``notifications/cancelled``): stop it; it is answered ``-32800``."""
        self._cancelled = True
        if self._cancel_requested is not None:
            self._cancel_requested.set()
        self._scope.cancel()

    def terminate(self) -> None:
        """The session ended (``DELETE``, idle, shutdown): stop the call; its POST is answered as on the SDK's path."""
        self._terminated = True
        self._scope.cancel()

    # -- the request's channel (mcp.shared.dispatcher.DispatchContext) --------------------------

    @property
    def transport(self) -> TransportContext:
        return _TRANSPORT

    @property
    def can_send_request(self) -> bool:
        return False

    @property
    def request_id(self) -> types.RequestId:
        return self._id

    @property
    def message_metadata(self) -> None:
        return None

    @property
    def cancel_requested(self) -> anyio.Event:
        if self._cancel_requested is None:  # made when asked for: nothing on a gateway's path asks
            self._cancel_requested = anyio.Event()
            if self._cancelled:
                self._cancel_requested.set()
        return self._cancel_requested

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Send a notification of the call on its POST's answer (dropped once the call has ended)."""
        if self._closed:
            logger.debug("dropped %s: the call %r has ended", method, self._id)
            return
        if params is not None:
            message = types.JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))
        else:
            message = types.JSONRPCNotification(jsonrpc="2.0", method=method)
        await self._answer_to.put(message.model_dump_json(by_alias=True, exclude_unset=True).encode(), final=False)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        # Only calls of clients that can be asked nothing come this way (direct_params).
        raise NoBackChannelError(method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """No progress: a call that asked for it takes the SDK's path."""
