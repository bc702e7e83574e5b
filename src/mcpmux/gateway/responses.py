"""Deferred responses for the 2025-era Streamable HTTP transport: JSON when nothing else comes first.

A client of Streamable HTTP must accept either answer to a request POST: one JSON body or an SSE
stream (spec 2025-11-25, "Sending Messages to the Server"). The SDK's 2025-era transport always
opens an SSE stream unless the whole server runs in JSON mode, and that stream is most of the
cost of a short call on both ends (sse-starlette starts four tasks per response; the client parses
the stream). :class:`DeferredTransport` waits for the first message that belongs to the request:

- the response itself (most calls): it goes out as ``application/json``;
- a notification or a server request first (progress, a log line, a relayed sampling or
  elicitation request): the answer becomes an SSE stream, with that message as its first event;
- nothing within :data:`SSE_AFTER_S`: the stream opens anyway and carries a keepalive comment
  every :data:`SSE_AFTER_S`, so an idle-read timeout between client and gateway cannot cut a
  long call.

The SDK's own 2026-07-28 path makes the same choice with the same window. Every other POST
(``initialize``, notifications, responses, malformed bodies) and every GET or DELETE is served by
the SDK transport unchanged. The SDK has no public hook for this: the transport's internals it
needs are reached through :class:`~mcpmux._private.mcp_sdk.SessionTransport`.
"""

from __future__ import annotations

import logging

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.streamable_http import CONTENT_TYPE_JSON, MCP_SESSION_ID_HEADER, EventMessage, check_accept_headers
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcpmux._private.mcp_sdk import SessionTransport

__all__ = ["SSE_AFTER_S", "DeferredTransport"]

logger = logging.getLogger(__name__)

SSE_AFTER_S = 15.0
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_PING = b": ping\r\n\r\n"


class DeferredTransport(SessionTransport):
    """The SDK's 2025-era server transport, answering each request as JSON unless it must stream."""

    async def handle_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        message = await self._plain_request(request)
        if message is None:
            await super().handle_post(scope, request, receive, send)
        elif await self.headers_ok(request, send):
            await self._answer(message, request, send)

    async def _plain_request(self, request: Request) -> JSONRPCRequest | None:
        """The POST's request when this class answers it; ``None`` leaves the POST to the SDK.

        The SDK keeps everything it answers differently or reports on: JSON mode, resumable
        streams (an event store), ``initialize``, notifications and responses, bodies that do not
        parse, and clients that do not accept both media types.
        """
        if self.is_json_response_enabled or self.has_event_store:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse) or not self.content_type_ok(request):
            return None
        try:
            # Starlette keeps the body on the request, so the SDK can still read it after this.
            message = jsonrpc_message_adapter.validate_python(
                pydantic_core.from_json(await request.body()), by_name=False
            )
        except (ValueError, ValidationError):
            return None
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            return None
        return message

    async def _answer(self, message: JSONRPCRequest, request: Request, send: Send) -> None:
        request_id = str(message.id)
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        reader = self.open_request_stream(request_id)
        streaming = False
        try:
            await self.dispatch(message, request, request_id, version)
            first = await _next(reader)
            if first is not None and _is_final(first):
                await self._send_json(send, first)
                return
            streaming = True
            await send({"type": "http.response.start", "status": 200, "headers": self._headers(_SSE_HEADERS)})
            await _stream(send, first, reader)
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            # The stream closed without a response: the session was terminated while this request ran.
            logger.debug("session terminated with request %s in flight", request_id)
            if not streaming:
                error = ErrorData(code=INTERNAL_ERROR, message="Session terminated before the request completed")
                await self._send_json(send, EventMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)), 500)
        finally:
            if streaming:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            await self.close_request_stream(request_id)

    async def _send_json(self, send: Send, event: EventMessage, status: int = 200) -> None:
        body = event.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
        headers = [(b"content-type", CONTENT_TYPE_JSON.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": self._headers(headers)})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def _headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if self.mcp_session_id:
            return [*headers, (MCP_SESSION_ID_HEADER.encode(), self.mcp_session_id.encode())]
        return headers


async def _next(reader: MemoryObjectReceiveStream[EventMessage]) -> EventMessage | None:
    """The next message for the request, or ``None`` after :data:`SSE_AFTER_S` without one."""
    with anyio.move_on_after(SSE_AFTER_S):
        return await reader.receive()
    return None


async def _stream(send: Send, first: EventMessage | None, reader: MemoryObjectReceiveStream[EventMessage]) -> None:
    """Write the request's messages as SSE events until its response, pinging while it is quiet."""
    event = first
    while True:
        await send({"type": "http.response.body", "body": _event(event) if event else _PING, "more_body": True})
        if event is not None and _is_final(event):
            return
        event = await _next(reader)


def _is_final(event: EventMessage) -> bool:
    return isinstance(event.message, JSONRPCResponse | JSONRPCError)


def _event(event: EventMessage) -> bytes:
    data = event.message.model_dump_json(by_alias=True, exclude_unset=True)
    head = f"id: {event.event_id}\r\n" if event.event_id else ""
    return f"{head}event: message\r\ndata: {data}\r\n\r\n".encode()
