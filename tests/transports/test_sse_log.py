"""A broken SSE stream is reported by mcpmux (the server's state and reason), so the SDK's own traceback of
it ("Error in sse_reader") is not printed at the default level; debug logging still shows it."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

import mcpmux.transports.http  # noqa: F401  (installs the filter on the SDK's logger)

SDK = logging.getLogger("mcp.client.sse")


@pytest.fixture
def caught() -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    handler = logging.Handler()  # level NOTSET: it shows whatever reaches it, as the CLI's does
    handler.emit = records.append  # type: ignore[method-assign]
    SDK.addHandler(handler)
    level = SDK.level
    try:
        yield records
    finally:
        SDK.removeHandler(handler)
        SDK.setLevel(level)


def _broken_stream() -> None:
    try:
        raise ConnectionResetError("peer closed the stream")
    except ConnectionResetError:
        SDK.exception("Error in sse_reader")


def test_the_sdks_traceback_of_a_broken_stream_is_not_shown_at_the_default_level(
    caught: list[logging.LogRecord],
) -> None:
    SDK.setLevel(logging.WARNING)
    _broken_stream()
    SDK.error("something else went wrong")  # anything else the SDK says still shows
    assert [r.getMessage() for r in caught] == ["something else went wrong"]


def test_debug_logging_still_shows_it_as_debug(caught: list[logging.LogRecord]) -> None:
    SDK.setLevel(logging.DEBUG)
    _broken_stream()
    (record,) = caught
    assert (record.getMessage(), record.levelno) == ("Error in sse_reader", logging.DEBUG)
    assert record.exc_info is not None
