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
    from mcpmux.testing.assertions import assert_called as assert_called
    from mcpmux.testing.failures import (
        Crash as Crash,
        Delay as Delay,
        Error as Error,
        GarbageOutput as GarbageOutput,
        Hang as Hang,
        HugeResult as HugeResult,
        ListChangedAfter as ListChangedAfter,
        Startup as Startup,
    )
    from mcpmux.testing.mock import ERAS as ERAS, Call as Call, Era as Era, MockServer as MockServer
    from mcpmux.testing.runtime import ToolContext as ToolContext
    from mcpmux.testing.serving import (
        TRANSPORTS as TRANSPORTS,
        Served as Served,
        TransportName as TransportName,
        in_memory as in_memory,
        serve as serve,
    )
    from mcpmux.testing.session import open_host as open_host, open_manager as open_manager

__getattr__, __dir__ = lazy_exports(__name__, __file__)
