"""A real child over our stdio transport: crash mid-call, death before the handshake, a hang.

The crash, the hang and the death before the handshake come from a :class:`~mcpmux.testing.MockServer`
served as a child (``python -m mcpmux.testing``).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import Connection, ToolResult
from mcpmux.errors import CommandNotFound, MCPTimeoutError, ServerExited
from mcpmux.testing import MockServer

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]


def flaky() -> MockServer:
    """A mock with ``echo`` (a handler), ``crash`` (exits with code 7 mid-call) and ``hang`` (never answers)."""
    mock = MockServer("bad").tool("echo", result="hi").tool("crash", result="unreachable")
    return mock.tool("hang", result="unreachable").crash("crash", exit_code=7).hang("hang")


async def test_a_crash_mid_call_fails_it_at_once_with_exit_code_and_stderr() -> None:
    with anyio.fail_after(20):
        async with flaky().serve("stdio") as served, served.connection(timeout_ms=60_000) as conn:
            assert ToolResult.of(await conn.call_tool("echo", {"text": "hi"})).text == "hi"
            started = time.perf_counter()
            with pytest.raises(ServerExited) as caught:
                await conn.call_tool("crash", {})
            elapsed = time.perf_counter() - started
    assert elapsed < 5
    assert caught.value.exit_code == 7
    assert "crashing (mock)" in caught.value.stderr_tail
    assert conn.info.pid is not None


async def test_a_child_that_exits_before_the_handshake_says_why() -> None:
    refusing = MockServer("bad").exit_on_start(3, "fatal: refusing to start")
    with anyio.fail_after(20), pytest.raises(ServerExited) as caught:
        async with refusing.serve("stdio") as served, served.connection():
            pass
    assert caught.value.exit_code == 3
    assert "refusing to start" in caught.value.stderr_tail


async def test_a_hanging_call_times_out_and_the_child_keeps_serving() -> None:
    mock = flaky()
    mock.tools["echo"].result = "still here"
    with anyio.fail_after(20):
        async with mock.serve("stdio") as served, served.connection() as conn:
            with pytest.raises(MCPTimeoutError):
                await conn.call_tool("hang", {}, timeout=0.3)
            assert ToolResult.of(await conn.call_tool("echo", {"text": "still here"})).text == "still here"


def shell(script: str, **fields: Any) -> Connection:
    """A connection to ``sh -c script`` (never an MCP server)."""
    return Connection(StdioServerConfig(name="sh", command="sh", args=("-c", script), **fields), Settings())


async def test_a_missing_command_is_command_not_found() -> None:
    server = StdioServerConfig(name="nope", command="no-such-mcp-server-xyz")
    with anyio.fail_after(10), pytest.raises(CommandNotFound):
        async with Connection(server, Settings()):
            pass


@pytest.mark.slow
async def test_a_child_that_never_answers_fails_the_connect_deadline() -> None:
    started = time.perf_counter()
    with anyio.fail_after(10), pytest.raises(MCPTimeoutError) as caught:
        async with shell("exec sleep 600", connect_timeout_ms=300):
            pass
    assert caught.value.operation == "connect"
    assert time.perf_counter() - started < 5


async def test_a_child_that_died_while_a_grandchild_holds_its_stdout_is_reported_not_timed_out() -> None:
    # The grandchild keeps the pipe open, so no end of stream comes: only the exit code tells.
    with anyio.fail_after(10), pytest.raises(ServerExited) as caught:
        async with shell("sleep 600 & echo 'dying (fixture)' >&2; exit 4", connect_timeout_ms=500):
            pass
    assert caught.value.exit_code == 4
    assert "dying (fixture)" in caught.value.stderr_tail


async def test_a_flood_of_log_notifications_neither_starves_the_answer_nor_piles_up_handlers() -> None:
    """100,000 log notifications (10 MB) before a result, to a client whose log handler is stuck: the
    answer comes, at most MAX_NOTIFICATIONS_IN_FLIGHT handlers ever wait, and the rest are counted dropped."""
    from mcpmux.connection import ClientCallbacks
    from mcpmux.connection._dispatch import MAX_NOTIFICATIONS_IN_FLIGHT
    from tests.transports.conftest import fixture_config

    started = 0
    release = anyio.Event()

    async def stuck_log(server: str, params: object) -> None:
        nonlocal started
        started += 1
        await release.wait()

    count = 100_000
    with anyio.fail_after(120):
        async with Connection(
            fixture_config(name="chatty"), Settings(), callbacks=ClientCallbacks(on_log=stuck_log)
        ) as conn:
            result = await conn.call_tool("chatter", {"count": count})
            assert not result.is_error and "spoke" in str(result.content)
            assert started <= MAX_NOTIFICATIONS_IN_FLIGHT
            assert conn.notifications_dropped >= count - MAX_NOTIFICATIONS_IN_FLIGHT
            release.set()


async def test_methods_mcpmux_does_not_wrap_go_through_request_and_notify_in_order() -> None:
    import sys
    from pathlib import Path

    from mcpmux.errors import ServerError

    tiny = Path(__file__).parents[1] / "fixtures" / "tiny_server.py"
    server = StdioServerConfig(name="tiny", command=sys.executable, args=("-S", "-E", str(tiny)))
    with anyio.fail_after(30):
        async with Connection(server, Settings()) as conn:
            assert await conn.request("ping") == {"resultType": "complete"}  # as every result reads on its way in
            await conn.notify("notifications/tiny/remember", {"n": 1})
            await conn.notify("notifications/tiny/remember", {"n": 2})
            recalled = await conn.request("tiny/recall")
            assert recalled["remembered"] == [{"n": 1}, {"n": 2}]
            with pytest.raises(ServerError, match="method not found: x/unknown") as caught:
                await conn.request("x/unknown", {"a": 1})
            assert caught.value.code == -32601
