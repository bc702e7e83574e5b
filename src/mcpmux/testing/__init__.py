"""Test kit: mock MCP servers on every transport and both protocol eras, record/replay, a pytest plugin.

::

    from mcpmux.testing import MockServer

    mock = MockServer("demo").tool("echo", lambda text: text).delay(0.1, tool="echo")
    async with mock.serve("http") as served:      # memory, stdio, tcp, websocket, sse, http
        async with served.connection() as conn:   # or hand served.config to mcpmux / the SDK
            await conn.call_tool("echo", {"text": "hi"})
    assert mock.calls[0].arguments == {"text": "hi"}

Names load on first use (see ``mcpmux._lazy``): the pytest plugin imports this package in every
test run, and stays cheap until a fixture is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.testing.assertions import assert_called
    from mcpmux.testing.failures import Crash, Delay, Error, GarbageOutput, Hang, HugeResult, ListChangedAfter
    from mcpmux.testing.mock import ERAS, Call, Era, MockServer
    from mcpmux.testing.serving import TRANSPORTS, Served, TransportName, serve
    from mcpmux.testing.session import open_manager

__all__ = [
    "ERAS",
    "TRANSPORTS",
    "Call",
    "Crash",
    "Delay",
    "Era",
    "Error",
    "GarbageOutput",
    "Hang",
    "HugeResult",
    "ListChangedAfter",
    "MockServer",
    "Served",
    "TransportName",
    "assert_called",
    "open_manager",
    "serve",
]

_FAILURES = ("Crash", "Delay", "Error", "GarbageOutput", "Hang", "HugeResult", "ListChangedAfter")
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "assert_called": "mcpmux.testing.assertions",
        **dict.fromkeys(_FAILURES, "mcpmux.testing.failures"),
        **dict.fromkeys(("ERAS", "Call", "Era", "MockServer"), "mcpmux.testing.mock"),
        **dict.fromkeys(("TRANSPORTS", "Served", "TransportName", "serve"), "mcpmux.testing.serving"),
        "open_manager": "mcpmux.testing.session",
    },
)
