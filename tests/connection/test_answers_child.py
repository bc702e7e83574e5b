"""What a real child's answers become: a server's own -32000 error, and an answer above the size cap.

The child is ``tests/fixtures/answers_server.py`` (a ``MockServer`` of the test kit), over stdio and
over real TCP on 127.0.0.1 (served by the kit); the size cap is also tested against server-everything (TypeScript,
which writes the ``id`` last).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import Connection
from mcpmux.errors import EXIT_FAILED, ResponseTooLarge, ServerError, exit_code_for
from tests.fixtures.answers_server import build
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "answers_server.py"
CAP = 64 * 1024
# Far above what a loaded machine needs, and far below the calls' own 120 s deadline: an answer that
# waited for its deadline instead of failing at once would fail the test.
WAIT_S = 60
SETTINGS = Settings(max_message_bytes=CAP, timeout_ms=120_000, connect_timeout_ms=30_000)


def stdio_child() -> StdioServerConfig:
    return StdioServerConfig(name="answers", command=sys.executable, args=(str(SERVER),))


@asynccontextmanager
async def connected(kind: str) -> AsyncIterator[Connection]:
    """A connection to the answers server over ``stdio`` (a child) or ``tcp`` (a real loopback socket)."""
    if kind == "stdio":
        async with Connection(stdio_child(), SETTINGS) as conn:
            yield conn
        return
    async with build().serve("tcp") as served, Connection(served.config, SETTINGS) as conn:
        yield conn


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("kind", ["stdio", "tcp"])
async def test_a_server_error_with_code_32000_is_the_servers_message_and_the_server_stays(kind: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(kind) as conn:
            with pytest.raises(ServerError) as caught:
                await conn.call_tool("fail", {"code": -32000, "message": "database is locked"})
            assert conn.is_connected
            after = await conn.call_tool("echo", {"text": "still here"})
    assert caught.value.code == -32000
    assert caught.value.error_message == "database is locked"
    assert "database is locked" in str(caught.value)
    assert exit_code_for(caught.value) == EXIT_FAILED
    assert text(after) == "still here"


async def test_a_server_error_saying_connection_closed_is_still_the_servers_error() -> None:
    # The SDK's own "connection closed" has this very shape: only a transport that ended makes it one.
    with anyio.fail_after(WAIT_S):
        async with connected("stdio") as conn:
            with pytest.raises(ServerError) as caught:
                await conn.call_tool("fail", {"code": -32000, "message": "Connection closed"})
            assert conn.is_connected
            await conn.ping()
    assert caught.value.code == -32000


@pytest.mark.parametrize("kind", ["stdio", "tcp"])
async def test_an_answer_above_the_cap_fails_its_call_at_once_and_the_server_stays(kind: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(kind) as conn:
            with pytest.raises(ResponseTooLarge) as caught:
                await conn.call_tool("big", {"size": 4 * CAP})
            assert conn.is_connected
            after = await conn.call_tool("echo", {"text": "still here"})
    error = caught.value
    assert (error.server, error.cap, error.method) == ("answers", CAP, "tools/call")
    assert error.size > 4 * CAP
    assert f"({error.size} bytes > {CAP} bytes cap)" in str(error)
    assert error.hint is not None and "max_message_bytes" in error.hint
    assert exit_code_for(error) == EXIT_FAILED
    assert text(after) == "still here"


async def test_an_oversized_answer_fails_only_its_own_call_among_concurrent_ones() -> None:
    results: dict[str, str | Exception] = {}

    async def call(conn: Connection, label: str, tool: str, arguments: dict[str, object]) -> None:
        try:
            results[label] = text(await conn.call_tool(tool, arguments))
        except ResponseTooLarge as exc:
            results[label] = exc

    with anyio.fail_after(WAIT_S):
        async with connected("stdio") as conn, anyio.create_task_group() as tg:
            tg.start_soon(call, conn, "big", "big", {"size": 2 * CAP})
            for label in ("a", "b", "c"):
                tg.start_soon(call, conn, label, "echo", {"text": label})
    assert isinstance(results.pop("big"), ResponseTooLarge)
    assert results == {"a": "a", "b": "b", "c": "c"}


@pytest.mark.peers
async def test_an_oversized_answer_of_a_typescript_server_id_last_fails_its_call_at_once() -> None:
    command, args = stdio_command("everything")
    server = StdioServerConfig(name="ev", command=command, args=tuple(args))
    with anyio.fail_after(WAIT_S):
        async with Connection(server, SETTINGS) as conn:
            with pytest.raises(ResponseTooLarge) as caught:
                await conn.call_tool("echo", {"message": "y" * 2 * CAP})
            after = await conn.call_tool("echo", {"message": "small"})
    assert caught.value.method == "tools/call"
    assert text(after) == "Echo: small"
