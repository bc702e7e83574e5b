"""The transport's streams as the SDK's dispatcher sees them, watched for two facts a connection needs.

1. Whether the transport is gone: the SDK fails waiting requests with ``-32000 "Connection closed"``
   when its read stream ends, the same code a server may use for its own errors. Only a read stream
   that ended, a write that failed or a connection closing makes that error a lost connection.
2. Which request an oversized answer was for: the framer drops a message above
   ``max_message_bytes`` and reports its id (:class:`~mcpmux.errors.MessageTooLarge`); the
   waiting request is answered at once with an error that maps to
   :class:`~mcpmux.errors.ResponseTooLarge`, instead of waiting for its deadline.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
from collections import deque
from types import TracebackType
from typing import Final, Self

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage

from mcpmux.errors import MessageTooLarge, ResponseTooLarge
from mcpmux.transports.base import TransportStreams

__all__ = ["TOO_LARGE_KEY", "StreamWatch"]

logger = logging.getLogger(__name__)

TOO_LARGE_KEY: Final = "mcpmux/responseTooLarge"
"""The ``data`` key of the error standing in for an oversized answer; its value is a one-time token."""
MAX_KEPT_ERRORS = 64
"""Oversized answers remembered until their request maps them (a request abandoned meanwhile never does)."""

Item = SessionMessage | Exception
RequestKey = int | str


class StreamWatch:
    """The read and write streams the dispatcher uses, and what they saw of the transport.

    Attributes:
        read_ended: the transport's read stream ended (end of stream, or closed under the reader).
        write_failed: a message could not be written: the transport is gone.
    """

    def __init__(self, server: str, streams: TransportStreams) -> None:
        self.server = server
        self.read_ended = False
        self.write_failed = False
        self.read = _WatchedRead(self, streams)
        self.write = _WatchedWrite(self, streams)
        self._pending: dict[RequestKey, str] = {}  # id -> method of our requests awaiting an answer
        self._queued: deque[Item] = deque()
        self._too_large: dict[str, ResponseTooLarge] = {}

    def transport_gone(self) -> bool:
        """Whether the transport ended (read side) or refused a message (write side)."""
        return self.read_ended or self.write_failed

    def too_large(self, data: object) -> ResponseTooLarge | None:
        """The error an oversized answer left for a request, given the ``data`` of the error it got."""
        if not isinstance(data, dict):
            return None
        token = data.get(TOO_LARGE_KEY)
        return self._too_large.pop(token, None) if isinstance(token, str) else None

    # -- what passes -------------------------------------------------------------------------------

    def sent(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            self._pending[coerce_request_id(message.id)] = message.method
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            request_id = (message.params or {}).get("requestId")
            if isinstance(request_id, int | str):
                self._pending.pop(coerce_request_id(request_id), None)

    def received(self, item: Item) -> Item:
        """Note an answer, or replace an oversized answer by error answers (queued after the first)."""
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCResponse):
                if message.id is not None:
                    self._pending.pop(coerce_request_id(message.id), None)
                # SEP-2322 (2026-07-28): servers send resultType, but clients "MUST assume resultType
                # complete when not specified", while the SDK's session checks results against the
                # revision's schema, where it is required. Earlier revisions' schemas accept it
                # (and the session drops it for them).
                if "resultType" not in message.result:
                    message.result["resultType"] = "complete"
            elif isinstance(message, types.JSONRPCError) and message.id is not None:
                self._pending.pop(coerce_request_id(message.id), None)
            return item
        if not isinstance(item, MessageTooLarge) or item.ends_stream or item.is_response is False:
            return item  # a request or notification of the server's, or a stream about to end
        answers = self._answers(item)
        if not answers:
            return item
        self._queued.extend(answers[1:])
        return answers[0]

    def next_queued(self) -> Item | None:
        return self._queued.popleft() if self._queued else None

    def _answers(self, item: MessageTooLarge) -> list[Item]:
        if item.request_id is not None:
            key = coerce_request_id(item.request_id)
            method = self._pending.pop(key, None)
            targets = [] if method is None else [(key, method)]
        elif item.is_response is not True:
            targets = []  # not even a readable JSON-RPC envelope (a giant banner line): nobody to blame
        else:
            # A response whose id is unreadable: every waiting request may be the one, and the one it
            # was will never be answered now; failing them all beats each waiting for its deadline.
            targets = list(self._pending.items())
            self._pending.clear()
            if targets:
                logger.warning(
                    "server %r: an oversized answer without a readable id fails %d waiting request(s)",
                    self.server,
                    len(targets),
                )
        return [self._error_answer(key, method, item) for key, method in targets]

    def _error_answer(self, key: RequestKey, method: str, item: MessageTooLarge) -> SessionMessage:
        while len(self._too_large) >= MAX_KEPT_ERRORS:
            self._too_large.pop(next(iter(self._too_large)))
        token = secrets.token_hex(16)
        error = ResponseTooLarge(self.server, method, item.size, item.limit, request_id=key)
        self._too_large[token] = error
        data = {TOO_LARGE_KEY: token}
        answer = types.JSONRPCError(
            jsonrpc="2.0", id=key, error=types.ErrorData(code=types.INTERNAL_ERROR, message=str(error), data=data)
        )
        return SessionMessage(answer)


class _WatchedRead:
    """The read stream: notes answers and the end of the stream, and stands in for oversized answers."""

    def __init__(self, watch: StreamWatch, streams: TransportStreams) -> None:
        self._watch, self._inner = watch, streams.read

    async def receive(self) -> Item:
        queued = self._watch.next_queued()
        if queued is not None:
            return queued
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.read_ended = True
            raise
        return self._watch.received(item)

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context of the last item, when the transport's stream keeps it (SDK HTTP, SSE).

        The dispatcher reads it (duck-typed) to run a handler in the context its transport task set.
        """
        context = getattr(self._inner, "last_context", None)
        return context if isinstance(context, contextvars.Context) else None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Item:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _WatchedWrite:
    """The write stream: notes our requests, and a write the transport refused."""

    def __init__(self, watch: StreamWatch, streams: TransportStreams) -> None:
        self._watch, self._inner = watch, streams.write

    async def send(self, item: SessionMessage, /) -> None:
        self._watch.sent(item)
        try:
            await self._inner.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.write_failed = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
