"""Answers to requests a connection sends on a line transport's direct path, handed over by the reader.

A connection may send its hot requests (``tools/call``, ``resources/read``) as lines it writes
itself, with ids from a range of its own, and register each id here with the parser of its answer.
The framer gives a line answering one of them to that parser and wakes its waiter, instead of
putting it on the read stream: no memory stream, no dispatcher, no per-request task, one
validation of the raw line. Every other line (the server's requests and notifications, answers to
the SDK's own requests) takes the stream path as before.

A line the parser does not claim (:class:`Unclaimed`: not a JSON-RPC answer at all) goes the
stream path too, where it is logged and ignored, exactly as it would have been; the request then
waits for its deadline, as on the stream path. An oversized answer fails its request at once
(:meth:`DirectReplies.too_large`), and the end of the transport wakes every waiter
(:meth:`DirectReplies.close`), so a request never outlives its connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

import anyio
from mcp.shared.dispatcher import coerce_request_id

from mcpmux.errors import MessageTooLarge, ResponseTooLarge
from mcpmux.transports.framing import ENVELOPE_BYTES, LineWriter, read_envelope

__all__ = ["DIRECT_ID_BASE", "DirectReplies", "Reply", "Unclaimed", "asyncio_loop"]

logger = logging.getLogger("mcpmux.transports")

DIRECT_ID_BASE: Final = 1 << 30
"""The first id of the direct path: far above the SDK's own (it counts from 1), within 32-bit ids."""

_HEAD: Final = b'{"jsonrpc":"2.0","id":'
_ANSWER_KEYS: Final = (b'"result"', b'"error"')
_MAX_ID_DIGITS: Final = 20

Line = bytes | bytearray


class Unclaimed(Exception):
    """Raised by a parser: the line is not an answer it can take; it goes the stream path."""


class Reply:
    """The waiter of one direct request: woken once, with the parsed answer or the error it met.

    On asyncio the waiter is a bare future of the loop (an ``anyio.Event`` builds an
    ``asyncio.Event``, a deque and a future per wait, a measurable share of a call); elsewhere an
    ``anyio.Event``. Cancelling the waiting task cancels the future; a later :meth:`wake` is a no-op.

    Attributes:
        method: the request's method, for the errors it may end with.
        value: what the parser returned; ``None`` until then, and when the transport ended.
        error: an exception to raise instead (the parser's, or an oversized answer's).
        timed_out: the deadline passed first (:meth:`DirectReplies.expire`).
    """

    __slots__ = ("_event", "_future", "error", "method", "parse", "timed_out", "value")

    def __init__(self, method: str, parse: Callable[[Line], object], loop: asyncio.AbstractEventLoop | None) -> None:
        self.method, self.parse = method, parse
        self._future: asyncio.Future[None] | None = loop.create_future() if loop is not None else None
        self._event = anyio.Event() if loop is None else None
        self.value: object = None
        self.error: Exception | None = None
        self.timed_out = False

    def wake(self) -> None:
        """The answer (or an error, the end of the transport, the deadline) arrived: wake the waiter."""
        future = self._future
        if future is None:
            assert self._event is not None, "one of the two is set"
            self._event.set()
        elif not future.done():  # done: already woken, or cancelled with its waiter
            future.set_result(None)

    @property
    def woken(self) -> bool:
        """Whether :meth:`wake` was called (or the waiter was cancelled)."""
        future = self._future
        if future is None:
            assert self._event is not None, "one of the two is set"
            return self._event.is_set()
        return future.done()

    async def wait(self) -> None:
        """Wait for :meth:`wake`."""
        future = self._future
        if future is None:
            assert self._event is not None, "one of the two is set"
            await self._event.wait()
        else:
            await future


class DirectReplies:
    """The table of direct requests awaiting an answer, shared by the connection and the framer.

    Args:
        writer: the transport's line writer, which direct requests are written with.
    """

    def __init__(self, writer: LineWriter) -> None:
        self.writer = writer
        self.waiting: dict[int, Reply] = {}
        self.closed = False
        self._next_id = DIRECT_ID_BASE
        self._loop = asyncio_loop()

    def expect(self, method: str, parse: Callable[[Line], object]) -> tuple[int, Reply]:
        """A new id for a ``method`` request and the waiter of its answer, parsed by ``parse``."""
        request_id = self._next_id = self._next_id + 1
        reply = self.waiting[request_id] = Reply(method, parse, self._loop)
        return request_id, reply

    def forget(self, request_id: int) -> None:
        """Stop waiting for ``request_id`` (answered, timed out or abandoned); a late answer is ignored."""
        self.waiting.pop(request_id, None)

    def expire(self, request_id: int) -> None:
        """The deadline of ``request_id`` passed: wake its waiter, and ignore a later answer."""
        reply = self.waiting.pop(request_id, None)
        if reply is not None:
            reply.timed_out = True
            reply.wake()

    def claim(self, line: Line) -> bool:
        """Hand ``line`` to the request it answers, if it answers a direct one; whether it did."""
        request_id = _answer_id(line)
        reply = self.waiting.get(request_id) if request_id is not None else None
        if reply is None:
            return False
        try:
            reply.value = reply.parse(line)
        except Unclaimed:
            return False
        except Exception as exc:  # noqa: BLE001 -- the request's own error, raised in the requester
            reply.error = exc
        del self.waiting[request_id]  # type: ignore[arg-type]  # not None: it was found
        reply.wake()
        return True

    def too_large(self, item: MessageTooLarge) -> None:
        """Fail the direct request an oversized answer was for (every one, if its id is unreadable),
        with the error the stream path gives (:class:`~mcpmux.errors.ResponseTooLarge`)."""
        # As the stream path decides (StreamWatch): a request's or a stream-ending line blames nobody.
        if item.ends_stream or item.is_response is False or (item.request_id is None and item.is_response is None):
            return
        if item.request_id is not None:
            key = coerce_request_id(item.request_id)
            targets = [key] if isinstance(key, int) and key in self.waiting else []
        else:
            targets = list(self.waiting)
        for key in targets:
            reply = self.waiting.pop(key)
            reply.error = ResponseTooLarge(item.server, reply.method, item.size, item.limit, request_id=key)
            reply.wake()

    def close(self) -> None:
        """The transport ended: wake every waiter (with neither value nor error) and refuse new ones."""
        self.closed = True
        waiting, self.waiting = self.waiting, {}
        for reply in waiting.values():
            reply.wake()


def asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or ``None`` on another backend (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _answer_id(line: Line) -> int | None:
    """The integer id of a JSON-RPC answer (result or error), read from its first or last bytes."""
    if line.startswith(_HEAD):
        # The shape every Python SDK server writes: {"jsonrpc":"2.0","id":N,"result":...}.
        comma = line.find(b",", len(_HEAD), len(_HEAD) + _MAX_ID_DIGITS + 1)
        raw = line[len(_HEAD) : comma]
        if comma > 0 and raw.isdigit() and line.startswith(_ANSWER_KEYS, comma + 1):
            return int(raw)
    request_id, is_response = read_envelope(bytes(line[:ENVELOPE_BYTES]), bytes(line[-ENVELOPE_BYTES:]))
    if is_response is not True or request_id is None:
        return None
    key = coerce_request_id(request_id)
    return key if isinstance(key, int) else None
