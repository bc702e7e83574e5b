"""Test kit: mock MCP servers on every transport and both protocol eras, record/replay, a pytest plugin.

::

    from mcpmux.testing import MockServer

    mock = MockServer("demo").tool("echo", lambda text: text).delay(0.1, tool="echo")
    async with mock.serve("http") as served:      # memory, stdio, tcp, websocket, sse, http
        async with served.connection() as conn:   # or hand served.config to mcpmux / the SDK
            await conn.call_tool("echo", {"text": "hi"})
    assert mock.calls[0].arguments == {"text": "hi"}
"""

from __future__ import annotations

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
