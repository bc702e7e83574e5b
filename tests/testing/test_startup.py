"""How a mock starts (``slow_start``, ``garbage_on_start``, ``exit_on_start``) and ``run_stdio``, seen by clients."""

from __future__ import annotations

import sys
import textwrap
import warnings
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import Connection, ToolResult
from mcpmux.errors import MCPMuxError, MCPTimeoutError, ServerExited, UsageError
from mcpmux.testing import MockServer, Startup, assert_called

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

DEADLINE_S = 60
IN_PROCESS = ["memory", "tcp", "websocket"]


def echo() -> MockServer:
    return MockServer("starter").tool("echo", result="awake")


async def test_a_child_that_exits_on_start_reports_its_code_and_reason() -> None:
    mock = echo().exit_on_start(3, "fatal: no API key (mock)")
    with anyio.fail_after(DEADLINE_S), pytest.raises(ServerExited) as caught:
        async with mock.serve("stdio") as served, served.connection():
            pass
    assert caught.value.exit_code == 3
    assert "fatal: no API key (mock)" in caught.value.stderr_tail
    assert mock.calls == []


@pytest.mark.parametrize("transport", IN_PROCESS)
async def test_a_session_that_exits_on_start_fails_the_connect(transport: str) -> None:
    mock = echo().exit_on_start()
    with anyio.fail_after(DEADLINE_S), pytest.raises(MCPMuxError):
        async with mock.serve(transport) as served, served.connection(connect_timeout_ms=30_000):  # type: ignore[arg-type]
            pass


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", *IN_PROCESS])
async def test_a_slow_start_outlasts_a_short_connect_deadline(transport: str) -> None:
    mock = echo().slow_start(600)
    with anyio.fail_after(DEADLINE_S), pytest.raises(MCPTimeoutError):
        async with mock.serve(transport) as served, served.connection(connect_timeout_ms=500):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize("transport", ["stdio", "memory"])
async def test_a_slow_start_within_the_deadline_then_serves(transport: str) -> None:
    mock = echo().slow_start(0.3)
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve(transport) as served, served.connection() as conn:  # type: ignore[arg-type]
            assert ToolResult.of(await conn.call_tool("echo", {})).text == "awake"
    assert_called(mock, "echo")


async def test_garbage_on_a_childs_stdout_before_the_handshake_is_skipped_by_mcpmux_and_the_sdk() -> None:
    mock = echo().garbage_on_start(5)
    with anyio.fail_after(DEADLINE_S):
        async with mock.serve("stdio") as served:
            async with served.connection() as conn:
                assert ToolResult.of(await conn.call_tool("echo", {})).text == "awake"
            async with served.sdk_transport() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                assert (await session.call_tool("echo", {})).content[0].text == "awake"  # type: ignore[union-attr]
    assert mock.count("echo") == 2


def test_the_startup_crosses_the_process_boundary_in_the_spec() -> None:
    mock = echo().slow_start(2).garbage_on_start(4).exit_on_start(9, "bye")
    assert mock.startup == Startup(delay=2, garbage_lines=4, exit_code=9, stderr="bye")
    assert MockServer.from_spec(mock.to_spec()).startup == mock.startup
    assert MockServer.from_spec({"name": "old"}).startup == Startup()


async def test_a_script_serves_its_mock_with_run_stdio_handlers_included(tmp_path: Path) -> None:
    script = tmp_path / "my_mock.py"
    script.write_text(
        textwrap.dedent(
            """
            from mcpmux.testing import MockServer

            mock = MockServer("scripted").tool("shout", lambda text: text.upper())
            if __name__ == "__main__":
                mock.run_stdio()
            """
        )
    )
    config = StdioServerConfig(name="scripted", command=sys.executable, args=(str(script),))
    with anyio.fail_after(DEADLINE_S):
        async with Connection(config, Settings()) as conn:
            assert ToolResult.of(await conn.call_tool("shout", {"text": "hi"})).text == "HI"
            pid = conn.info.pid
    assert pid is not None


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_a_startup_behaviour_over_http_is_refused_up_front(transport: str) -> None:
    with pytest.raises(UsageError, match="cannot play"):
        async with echo().slow_start(1).serve(transport):  # type: ignore[arg-type]
            pass


async def test_a_mock_without_resource_subscriptions_says_so_and_refuses_one() -> None:
    mock = MockServer("plain").resource("memo://a", "a").resource_subscriptions(False)
    assert MockServer.from_spec(mock.to_spec()).subscribable is False
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve("memory") as served,
            served.sdk_transport() as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.capabilities.resources is not None
            assert init.capabilities.resources.subscribe is False
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)  # the handshake era's verb, on purpose
                with pytest.raises(MCPError) as refused:
                    await session.subscribe_resource("memo://a")
    assert refused.value.error.code == types.METHOD_NOT_FOUND
