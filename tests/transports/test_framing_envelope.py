"""An oversized message is dropped, but its JSON-RPC id and kind are read from its two ends."""

from __future__ import annotations

import json

import pytest

from mcpmux.errors import MessageTooLarge
from mcpmux.transports.framing import LineFramer, read_envelope

CAP = 4096


def oversized(framer: LineFramer, line: bytes, chunk: int) -> MessageTooLarge:
    items = [item for i in range(0, len(line), chunk) for item in framer.feed(line[i : i + chunk])]
    (error,) = items
    assert isinstance(error, MessageTooLarge)
    return error


PYTHON_ORDER = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"id": 3, "text": "x" * 3 * CAP}]}})
TYPESCRIPT_ORDER = json.dumps({"result": {"items": [{"id": 3}] * 2000}, "jsonrpc": "2.0", "id": "req-9"})
NESTED_ID_LAST = json.dumps({"jsonrpc": "2.0", "result": {"rows": ["x" * 3 * CAP], "id": 5}})
SERVER_REQUEST = json.dumps(
    {"method": "sampling/createMessage", "params": {"x": "y" * 3 * CAP}, "jsonrpc": "2.0", "id": 0}
)
NOTIFICATION = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "z" * 3 * CAP}})


@pytest.mark.parametrize("chunk", [CAP * 4, 1000, 97])
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (PYTHON_ORDER, (7, True)),
        (TYPESCRIPT_ORDER, ("req-9", True)),
        (NESTED_ID_LAST, (None, True)),  # an id inside the result is not the message's
        (SERVER_REQUEST, (0, False)),
        (NOTIFICATION, (None, False)),
    ],
)
def test_an_oversized_message_carries_its_id_and_kind(line: str, expected: tuple[object, bool], chunk: int) -> None:
    framer = LineFramer("t", CAP)
    error = oversized(framer, line.encode() + b"\n", chunk)
    assert (error.request_id, error.is_response) == expected
    assert error.size == len(line)


def test_an_oversized_message_cut_by_the_end_of_the_stream_still_carries_its_id() -> None:
    framer = LineFramer("t", CAP)
    assert framer.feed(PYTHON_ORDER.encode()) == []
    (error,) = framer.finish()
    assert isinstance(error, MessageTooLarge)
    assert (error.request_id, error.is_response) == (7, True)


def test_garbage_has_no_id_and_no_kind() -> None:
    assert read_envelope(b"x" * 600, b"y" * 600) == (None, None)
    assert read_envelope(b'{"id": {"a": 1}, "result": {', b"}}") == (None, None)
