"""Newline-delimited JSON framing: chunking, CRLF, size cap with recovery, garbage, speed, memory."""

from __future__ import annotations

import json
import logging
import time
import tracemalloc

import anyio
import pytest
from mcp.shared.message import SessionMessage

from mcpmux.errors import MessageTooLarge
from mcpmux.transports.framing import LineFramer, LineWriter

MB = 1024 * 1024


def request(n: int, pad: int = 0) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping", "params": {"_meta": {"pad": "x" * pad}}}).encode()


def ids(items: list[SessionMessage | Exception]) -> list[object]:
    return [getattr(i.message, "id", None) if isinstance(i, SessionMessage) else type(i).__name__ for i in items]


def test_messages_split_across_chunks_are_reassembled() -> None:
    framer = LineFramer("t", MB)
    data = request(1) + b"\n" + request(2) + b"\n"
    items = [item for i in range(len(data)) for item in framer.feed(data[i : i + 1])]
    assert ids(items) == [1, 2]


def test_crlf_line_endings_and_blank_lines_are_accepted() -> None:
    framer = LineFramer("t", MB)
    assert ids(framer.feed(request(1) + b"\r\n\r\n\n" + request(2) + b"\r\n")) == [1, 2]


def test_an_unterminated_last_message_is_delivered_at_end_of_stream() -> None:
    framer = LineFramer("t", MB)
    assert framer.feed(request(7)) == []
    assert ids(framer.finish()) == [7]


def test_non_json_lines_are_counted_and_logged_never_fatal(caplog: pytest.LogCaptureFixture) -> None:
    framer = LineFramer("t", MB)
    with caplog.at_level(logging.WARNING, logger="mcpmux.transports"):
        items = framer.feed(b"hello banner\n" + request(1) + b'\n{"not": "jsonrpc"}\n' + request(2) + b"\n")
    assert ids(items) == [1, 2]
    assert framer.garbage_lines == 2
    assert "hello banner" in caplog.text


def test_a_line_over_the_cap_becomes_one_error_and_later_messages_still_flow() -> None:
    framer = LineFramer("big", 64 * 1024)
    items = framer.feed(request(1) + b"\n")
    for _ in range(20):  # 1.25 MB without a newline, in chunks
        items += framer.feed(b"y" * 65536)
    items += framer.feed(b"tail\n" + request(2) + b"\n")
    assert ids(items) == [1, "MessageTooLarge", 2]
    error = items[1]
    assert isinstance(error, MessageTooLarge)
    assert error.server == "big"
    assert error.limit == 64 * 1024
    assert error.size == 20 * 65536 + 4


def test_a_line_over_the_cap_inside_one_chunk_is_rejected() -> None:
    framer = LineFramer("t", 1024)
    assert ids(framer.feed(request(1, pad=4096) + b"\n" + request(2) + b"\n")) == ["MessageTooLarge", 2]


def test_an_oversized_line_cut_by_end_of_stream_is_reported() -> None:
    framer = LineFramer("t", 1024)
    framer.feed(b"z" * 5000)
    assert ids(framer.finish()) == ["MessageTooLarge"]


def test_a_40_mb_message_is_parsed_in_linear_time() -> None:
    payload = request(1, pad=40 * MB) + b"\n"
    framer = LineFramer("t", 64 * MB)
    start = time.perf_counter()
    items = [item for i in range(0, len(payload), 65536) for item in framer.feed(payload[i : i + 65536])]
    elapsed = time.perf_counter() - start
    assert ids(items) == [1]
    assert elapsed < 3.0, f"40 MB took {elapsed:.2f} s"  # < 1 s on the reference machine; slack for CI


def test_memory_stays_bounded_while_skipping_an_oversized_line() -> None:
    framer = LineFramer("t", 1 * MB)
    chunk = b"q" * 65536
    tracemalloc.start()
    try:
        for _ in range(50 * 16):  # 50 MB
            framer.feed(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ids(framer.feed(b"\n" + request(3) + b"\n")) == ["MessageTooLarge", 3]
    assert peak < 4 * MB, f"peak {peak} bytes"


class _Sink:
    """A byte sink that records what it is sent, or fails like a closed pipe."""

    def __init__(self, error: Exception | None = None) -> None:
        self.sent: list[bytes] = []
        self.error = error

    async def send(self, item: bytes) -> None:
        if self.error is not None:
            raise self.error
        self.sent.append(item)


@pytest.mark.anyio
async def test_the_line_writer_writes_each_message_as_one_line() -> None:
    sink = _Sink()
    async with LineWriter(sink) as writer:  # type: ignore[arg-type]
        await writer.send(LineFramer("t", MB).feed(request(1) + b"\n")[0])  # type: ignore[arg-type]
    assert len(sink.sent) == 1 and sink.sent[0].endswith(b"}\n") and json.loads(sink.sent[0])["id"] == 1


@pytest.mark.anyio
async def test_the_line_writer_refuses_after_close_and_after_a_broken_pipe() -> None:
    message = LineFramer("t", MB).feed(request(1) + b"\n")[0]
    closed = LineWriter(_Sink())  # type: ignore[arg-type]
    await closed.aclose()
    with pytest.raises(anyio.ClosedResourceError):
        await closed.send(message)  # type: ignore[arg-type]
    broken = LineWriter(_Sink(BrokenPipeError()))  # type: ignore[arg-type]
    await broken.send(message)  # type: ignore[arg-type]  # lost, as a writer task loses it
    with pytest.raises(anyio.BrokenResourceError):
        await broken.send(message)  # type: ignore[arg-type]
