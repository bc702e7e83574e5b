"""The direct path's table as the framer drives it: answers by id, big lines handed over, oversized answers.

Unit tests: the framer is fed bytes in memory; the parsers are plain functions. The same paths run
against real children in ``tests/connection/test_lean.py`` and ``tests/attacks/test_lean_attacks.py``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp.shared.message import SessionMessage

from mcpmux.errors import MessageTooLarge, ResponseTooLarge
from mcpmux.transports.direct import DirectReplies, Line, Unclaimed
from mcpmux.transports.framing import HANDOVER_BYTES, LineFramer, LineWriter

CAP = 8 * HANDOVER_BYTES


class _Sink:
    async def send(self, item: bytes) -> None:
        raise AssertionError("nothing is written in these tests")

    async def aclose(self) -> None:
        pass


def table() -> tuple[DirectReplies, LineFramer]:
    replies = DirectReplies(LineWriter(_Sink()))  # type: ignore[arg-type]
    return replies, LineFramer("srv", CAP, replies)


def as_json(line: Line) -> Any:
    answer = json.loads(bytes(line))
    if "result" not in answer:
        raise Unclaimed
    return answer["result"]


def answer(request_id: Any, result: Any, *, id_last: bool = False, spaced: bool = False) -> bytes:
    message = {"result": result, "jsonrpc": "2.0", "id": request_id} if id_last else {
        "jsonrpc": "2.0", "id": request_id, "result": result}  # fmt: skip
    return json.dumps(message, separators=(", ", ": ") if spaced else (",", ":")).encode() + b"\n"


@pytest.mark.parametrize("shape", [{}, {"id_last": True}, {"spaced": True}, {"id_last": True, "spaced": True}], ids=str)
def test_an_answer_of_any_member_order_reaches_its_waiter_and_not_the_stream(shape: dict[str, bool]) -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    assert framer.feed(answer(request_id, {"n": 1}, **shape)) == []
    assert reply.woken and reply.value == {"n": 1} and reply.error is None
    assert not replies.waiting


def test_an_answer_with_the_id_as_a_string_reaches_its_waiter() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    assert framer.feed(answer(str(request_id), {"n": 2})) == []
    assert reply.value == {"n": 2}


def test_lines_that_answer_no_direct_request_take_the_stream() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    request = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode() + b"\n"
    items = framer.feed(answer(7, {}) + request + answer(request_id + 1, {}))
    assert [type(i) for i in items] == [SessionMessage, SessionMessage, SessionMessage]
    assert not reply.woken  # a server's request carrying our id is its own request


def test_an_answer_its_parser_refuses_takes_the_stream_and_the_request_keeps_waiting() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    items = framer.feed(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": 1, "message": "m"}}).encode()
                        + b"\n")  # fmt: skip
    assert len(items) == 1 and not reply.woken


def test_a_parser_error_is_the_requests_error() -> None:
    replies, framer = table()

    def broken(line: Line) -> object:
        raise ValueError("not a result")

    request_id, reply = replies.expect("tools/call", broken)
    framer.feed(answer(request_id, {}))
    assert isinstance(reply.error, ValueError) and reply.woken


@pytest.mark.parametrize("crlf", [False, True])
def test_a_big_answer_is_handed_over_whole(crlf: bool) -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    line = answer(request_id, {"text": "x" * (2 * HANDOVER_BYTES)})
    if crlf:
        line = line[:-1] + b"\r\n"
    items: list[Any] = []
    for start in range(0, len(line), 65536):
        items += framer.feed(line[start : start + 65536])
    assert items == []
    assert reply.value == {"text": "x" * (2 * HANDOVER_BYTES)}
    assert framer.feed(answer(9, {"after": True})) != []  # the framer goes on with a fresh buffer


def test_a_big_line_for_nobody_is_handed_over_to_the_stream() -> None:
    _, framer = table()
    items = framer.feed(answer(9, {"text": "y" * (2 * HANDOVER_BYTES)}))
    assert len(items) == 1 and isinstance(items[0], SessionMessage)


def test_an_oversized_answer_fails_its_direct_request_at_once_with_its_method() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("resources/read", as_json)
    other_id, other = replies.expect("tools/call", as_json)
    items = framer.feed(answer(request_id, {"text": "z" * (CAP + 10)}))
    assert [type(i) for i in items] == [MessageTooLarge]  # still reported on the stream
    assert isinstance(reply.error, ResponseTooLarge)
    assert (reply.error.method, reply.error.request_id) == ("resources/read", request_id)
    assert not other.woken and other_id in replies.waiting


def test_an_oversized_answer_without_a_readable_id_fails_every_direct_request() -> None:
    replies, framer = table()
    waiting = [replies.expect("tools/call", as_json)[1] for _ in range(3)]
    framer.feed(b'{"result":{"text":"' + b"w" * (CAP + 10) + b'"}}\n')
    assert all(isinstance(reply.error, ResponseTooLarge) for reply in waiting)


def test_an_oversized_request_of_the_server_fails_no_direct_request() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "sampling/createMessage",
                       "params": {"x": "v" * (CAP + 10)}}).encode() + b"\n"  # fmt: skip
    framer.feed(line)
    assert not reply.woken


def test_the_end_of_the_transport_wakes_every_waiter_and_refuses_new_ones() -> None:
    replies, _ = table()
    waiting = [replies.expect("tools/call", as_json)[1] for _ in range(3)]
    replies.close()
    assert all(r.woken and r.value is None and r.error is None for r in waiting)
    assert replies.closed


def test_a_deadline_wakes_its_waiter_and_a_late_answer_goes_to_the_stream() -> None:
    replies, framer = table()
    request_id, reply = replies.expect("tools/call", as_json)
    replies.expire(request_id)
    assert reply.timed_out and reply.woken
    assert len(framer.feed(answer(request_id, {}))) == 1


@pytest.mark.anyio
async def test_on_asyncio_a_waiter_is_woken_once_and_a_wake_after_its_cancellation_is_harmless() -> None:
    replies = DirectReplies(LineWriter(_Sink()))  # type: ignore[arg-type]
    first_id, first = replies.expect("tools/call", as_json)
    second_id, second = replies.expect("tools/call", as_json)
    assert not first.woken and not second.woken

    async with anyio.create_task_group() as tg:
        tg.start_soon(first.wait)
        await anyio.lowlevel.checkpoint()
        assert replies.claim(answer(first_id, {"n": 1}))  # wakes the waiting task
        first.wake()  # a second wake is a no-op
    assert first.woken and first.value == {"n": 1}

    with anyio.move_on_after(0.01) as scope:  # the waiter's task cancelled: the future with it
        await second.wait()
    assert scope.cancelled_caught and second.woken
    replies.expire(second_id)  # its deadline timer firing after the cancellation raises nothing
    assert second.timed_out
