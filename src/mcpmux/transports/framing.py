"""Newline-delimited JSON-RPC framing with a size cap, shared by the stdio and TCP transports.

The framer keeps one ``bytearray`` and searches for ``\\n`` only in bytes it has not scanned yet, so
a message costs time linear in its size. A message longer than ``max_message_bytes`` is never
buffered whole: once the pending bytes pass the cap they are dropped, the rest of the line is skipped
as it arrives, and one :class:`~mcpmux.errors.MessageTooLarge` item takes its place in the stream.
Only its first and last few hundred bytes are kept, to read its JSON-RPC id and kind, so the request
it answers can fail at once. Lines that are not JSON-RPC are counted and logged, never fatal.
"""

from __future__ import annotations

import json
import logging
import math
import re
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self

import anyio
import mcp_types
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcpmux._private.anyio import asyncio_writer
from mcpmux.errors import MessageTooLarge

if TYPE_CHECKING:
    from mcpmux.transports.direct import DirectReplies

__all__ = [
    "READ_CHUNK_BYTES",
    "LineFramer",
    "LineWriter",
    "encode_message",
    "log_garbage",
    "parse_message",
    "pump_lines",
    "pump_messages",
    "read_envelope",
]

logger = logging.getLogger("mcpmux.transports")

READ_CHUNK_BYTES = 64 * 1024
GARBAGE_WARNINGS = 10
GARBAGE_SNIPPET_CHARS = 120
ENVELOPE_BYTES = 512
"""Bytes kept from each end of an oversized message, to read its id and kind."""
HANDOVER_BYTES: Final = 1 << 20
"""A line at least this long that fills the whole buffer is handed over as the buffer, not copied."""

Item = SessionMessage | Exception


class LineFramer:
    """Turns a byte stream into JSON-RPC messages, one per line.

    Attributes:
        server: the server name carried by :class:`MessageTooLarge` items.
        max_message_bytes: the largest line accepted, without its newline.
        garbage_lines: how many lines were not JSON-RPC messages so far.
        oversized: how many lines were dropped for exceeding the cap so far.
        direct: the table of a connection's direct requests (see :mod:`mcpmux.transports.direct`):
            a line answering one is handed to it instead of being put on the stream.
    """

    def __init__(self, server: str, max_message_bytes: int, direct: DirectReplies | None = None) -> None:
        self.server = server
        self.max_message_bytes = max_message_bytes
        self.direct = direct
        self.garbage_lines = 0
        self.oversized = 0
        self._buffer = bytearray()
        self._skipped: int | None = None  # bytes of the oversized line dropped so far
        self._head = b""  # the first and last bytes of the oversized line being skipped
        self._tail = b""

    def feed(self, data: bytes) -> list[Item]:
        """Consume ``data`` and return the messages (and errors) completed by it, in order."""
        items: list[Item] = []
        if self._skipped is not None:
            end = data.find(b"\n")
            if end < 0:
                self._skipped += len(data)
                self._tail = (self._tail + data[-ENVELOPE_BYTES:])[-ENVELOPE_BYTES:]
                return items
            self._tail = (self._tail + data[max(0, end - ENVELOPE_BYTES) : end])[-ENVELOPE_BYTES:]
            self._push(self._too_large(self._skipped + end), items)
            data = data[end + 1 :]
        scanned = len(self._buffer)
        self._buffer += data
        start = 0
        end = self._buffer.find(b"\n", scanned)
        while end >= 0:
            if start == 0 and end + 1 == len(self._buffer) and end >= HANDOVER_BYTES:
                # One big line fills the buffer (a large result): handed over, not copied, which
                # keeps a big answer's peak memory near its size plus what it is parsed into.
                self._take_buffer(end, items)
                return items
            self._take(start, end, items)
            start = end + 1
            end = self._buffer.find(b"\n", start)
        if start:
            del self._buffer[:start]
        if len(self._buffer) > self.max_message_bytes:
            self._skipped = len(self._buffer)
            self._head, self._tail = bytes(self._buffer[:ENVELOPE_BYTES]), bytes(self._buffer[-ENVELOPE_BYTES:])
            self._buffer = bytearray()
        return items

    def finish(self) -> list[Item]:
        """Report what the end of the stream leaves: an unterminated message or oversized line."""
        items: list[Item] = []
        if self._skipped is not None:
            self._push(self._too_large(self._skipped), items)
        elif self._buffer.strip():
            self._take(0, len(self._buffer), items)
        self._buffer = bytearray()
        return items

    def _take(self, start: int, end: int, items: list[Item]) -> None:
        if end > start and self._buffer[end - 1] == 0x0D:  # CRLF from a Windows peer
            end -= 1
        if end - start > self.max_message_bytes:
            self._head = bytes(self._buffer[start : start + ENVELOPE_BYTES])
            self._tail = bytes(self._buffer[end - ENVELOPE_BYTES : end])
            self._push(self._too_large(end - start), items)
            return
        with memoryview(self._buffer) as view, view[start:end] as part:
            self._line(part.tobytes(), items)

    def _take_buffer(self, end: int, items: list[Item]) -> None:
        """Take the whole buffer as the line ending at ``end`` (its newline), and start a new buffer."""
        line, self._buffer = self._buffer, bytearray()
        if line[end - 1] == 0x0D:
            end -= 1
        if end > self.max_message_bytes:
            self._head, self._tail = bytes(line[:ENVELOPE_BYTES]), bytes(line[end - ENVELOPE_BYTES : end])
            self._push(self._too_large(end), items)
            return
        del line[end:]
        self._line(line, items)

    def _line(self, line: bytes | bytearray, items: list[Item]) -> None:
        if not line or line.isspace():
            return
        direct = self.direct
        if direct is not None and direct.waiting and direct.claim(line):
            return
        try:
            items.append(parse_message(line))
        except ValidationError as exc:
            self._garbage(line, exc)

    def _push(self, item: MessageTooLarge, items: list[Item]) -> None:
        """Queue an oversized line's report; a direct request it answered fails at once."""
        if self.direct is not None and self.direct.waiting:
            self.direct.too_large(item)
        items.append(item)

    def _too_large(self, size: int) -> MessageTooLarge:
        request_id, is_response = read_envelope(self._head, self._tail)
        self._skipped, self._head, self._tail = None, b"", b""
        self.oversized += 1
        logger.warning(
            "server %r: dropped a %d-byte message above the %d-byte cap (id %r)",
            self.server,
            size,
            self.max_message_bytes,
            request_id,
        )
        return MessageTooLarge(
            self.server, size, self.max_message_bytes, request_id=request_id, is_response=is_response
        )

    def _garbage(self, line: bytes | bytearray, exc: ValidationError) -> None:
        self.garbage_lines += 1
        log_garbage(self.server, line, exc, self.garbage_lines)


_SCALAR = rb'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null'
# One leading member of the top-level object: a scalar, or the opening of a nested value.
_MEMBER = re.compile(rb'\s*"((?:[^"\\]|\\.)*)"\s*:\s*(' + _SCALAR + rb"|[\[{])\s*,?")
# The id as the top-level object's last member (optionally before "jsonrpc"): TypeScript and Go order.
_TRAILING_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def read_envelope(head: bytes, tail: bytes) -> tuple[int | str | None, bool | None]:
    """The JSON-RPC ``id`` and kind of a message known only by its first and last bytes.

    Returns ``(id, is_response)``: ``is_response`` is ``True`` for a result or error, ``False`` for a
    request or notification (it has a ``method``), ``None`` when the leading members do not say.
    Only top-level members count: the leading scalars before the first nested value, or an ``id``
    that closes the object; an ``"id"`` inside a result is never taken for the message's.
    """
    members: dict[bytes, bytes] = {}
    nested: bytes | None = None
    position = head.find(b"{") + 1 if head.lstrip().startswith(b"{") else 0
    while position and (match := _MEMBER.match(head, position)) is not None:
        key, value = match.group(1), match.group(2)
        if value in (b"{", b"["):
            nested = key
            break
        members[key] = value
        position = match.end()
    keys = {*members, nested}
    is_response: bool | None = None
    if keys & {b"result", b"error"}:
        is_response = True
    elif b"method" in keys:
        is_response = False
    raw = members.get(b"id")
    if raw is None and (match := _TRAILING_ID.search(tail.rstrip(b"\r"))) is not None:
        raw = match.group(1)
    try:
        value = json.loads(raw) if raw is not None else None
    except ValueError:  # an invalid escape in a string id
        value = None
    return (value if isinstance(value, int | str) else None), is_response


def parse_message(data: bytes | str | bytearray) -> SessionMessage:
    """Parse one JSON-RPC message.

    Raises:
        pydantic.ValidationError: ``data`` is not JSON, or not a JSON-RPC message.
    """
    return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(data, by_name=False))


def log_garbage(server: str, data: bytes | str | bytearray, exc: ValidationError, count: int) -> None:
    """Log a message that could not be parsed; the ``count``-th of its connection."""
    # Servers that print banners would flood the log; the count keeps the evidence.
    level = logging.WARNING if count <= GARBAGE_WARNINGS else logging.DEBUG
    snippet = data[:GARBAGE_SNIPPET_CHARS]
    if isinstance(snippet, bytes):
        snippet = snippet.decode("utf-8", "replace")
    errors = exc.errors(include_url=False)
    reason = errors[0]["msg"] if errors else str(exc)
    logger.log(
        level, "server %r: ignored a message that is not JSON-RPC (%d so far): %r (%s)", server, count, snippet, reason
    )


def encode_message(message: SessionMessage) -> bytes:
    """Serialize one message as a UTF-8 JSON line, as the SDK's own stdio transport does."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


async def pump_lines(source: ByteReceiveStream, sink: MemoryObjectSendStream[Item], framer: LineFramer) -> None:
    """Forward the messages framed from ``source`` into ``sink`` until ``source`` ends.

    Returns at end of stream, when ``source`` is closed under the read, or when ``sink`` is closed;
    ``sink`` is left open for the caller to add a final item.
    """
    try:
        while True:
            try:
                chunk = await source.receive(READ_CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                break
            for item in framer.feed(chunk):
                await sink.send(item)
        for item in framer.finish():
            await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        logger.debug("server %r: reader stopped, the session closed its stream", framer.server)


async def pump_messages(source: MemoryObjectReceiveStream[SessionMessage], sink: ByteSendStream) -> None:
    """Write each message from ``source`` to ``sink`` as a line until either side closes.

    On a write failure the ``source`` is closed, so a sender fails at once instead of blocking.
    """
    async with source:
        try:
            async for message in source:
                await sink.send(encode_message(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            logger.debug("writer stopped: %r", exc)


class LineWriter:
    """A message send stream that writes each message as a line straight into ``sink``.

    For sinks that take concurrent writers (a child's stdin: each message is one ``write`` of
    the whole line, and asyncio lets several tasks wait on the drain): no writer task and no
    memory stream in between, so a request costs one task switch less than with
    :func:`pump_messages`. On asyncio both :meth:`send` and :meth:`send_line` write to the
    child's ``StreamWriter`` itself (see :meth:`send_line`), waiting only while the pipe is full.

    A write that fails (the child is gone) is logged, not raised, exactly as a writer task would
    lose it: the request then fails with what the read side reports, a child's exit code and
    stderr rather than a bare broken pipe. Later sends raise :class:`anyio.BrokenResourceError`.
    """

    def __init__(self, sink: ByteSendStream) -> None:
        self._sink = sink
        self._raw = asyncio_writer(sink)
        self._closed = False
        self._broken = False

    async def send(self, item: SessionMessage, /) -> None:
        await self.send_line(encode_message(item))

    async def _write(self, line: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        try:
            await self._sink.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._broken = True
            logger.debug("writer stopped: %r", exc)

    async def send_line(self, line: bytes, deadline: float = math.inf) -> None:
        """Write one message already encoded as a line (its newline included): the direct path's write.

        Failures are handled as by :meth:`send`. On asyncio, the line goes to the child's
        ``StreamWriter`` itself, waiting only when the pipe is full: anyio's stream would add a
        turn of the event loop to every write (see :mod:`mcpmux._private.anyio`). A wait for the
        pipe ends at ``deadline`` (``anyio.current_time()`` based) with ``TimeoutError``.

        Raises:
            anyio.ClosedResourceError: the writer was closed.
            anyio.BrokenResourceError: an earlier write failed.
            TimeoutError: the pipe stayed full until ``deadline``.
        """
        raw = self._raw
        if raw is None:
            if deadline == math.inf:
                await self._write(line)
                return
            with anyio.fail_at(deadline):
                await self._write(line)
            return
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        try:
            transport = raw.transport
            if transport.is_closing():
                raise BrokenPipeError("the child's stdin is closed")
            raw.write(line)
            if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
                with anyio.fail_at(deadline):
                    await raw.drain()
        except (ConnectionResetError, BrokenPipeError, RuntimeError) as exc:
            self._broken = True
            logger.debug("writer stopped: %r", exc)

    def close(self) -> None:
        """Refuse further messages (the sink itself is closed by its owner)."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
