"""The lean path (stdio, 2024-2025 eras) behaves as the SDK's path: each test runs both, on a real child.

The child is ``tests/fixtures/lean_server.py`` (a ``MockServer`` of the test kit with Python
handlers). ``lean=False`` is the SDK's path, the reference every answer is compared with.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import MCPMuxError, MCPTimeoutError, ProtocolError, ServerError, ServerExited
from mcpmux.testing import MockServer
from mcpmux.transports.direct import DIRECT_ID_BASE

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "lean_server.py"
WAIT_S = 60
SETTINGS = Settings(timeout_ms=120_000, connect_timeout_ms=30_000)
BOTH = pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])


async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@asynccontextmanager
async def connected(lean: bool, **settings: Any) -> AsyncIterator[Connection]:
    server = StdioServerConfig(name="lean", command=sys.executable, args=(str(SERVER),))
    callbacks = ClientCallbacks(elicitation=elicit)
    async with Connection(server, SETTINGS.model_copy(update=settings), callbacks=callbacks, lean=lean) as conn:
        assert conn.lean_path is lean
        yield conn


async def stderr_says(conn: Connection, words: str) -> None:
    """Wait (within the test's deadline) until the child's stderr shows ``words``."""
    for _ in range(100_000):
        if words in conn.stderr_tail():
            return
        await anyio.sleep(0.05)


def text(result: types.CallToolResult | types.ReadResourceResult) -> str:
    if isinstance(result, types.ReadResourceResult):
        return "".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def outcome(result: Any) -> Any:
    """What a caller sees of an answer or a failure, comparable across the two paths."""
    if isinstance(result, MCPMuxError):
        return type(result).__name__, str(result)
    return result.model_dump(by_alias=True, exclude_unset=True)


async def answers(conn: Connection) -> list[Any]:
    """Every kind of answer, in order: the unlisted first (the session lists them on its own)."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("structured", {"n": 5}),
        ("echo", {"text": "héllo \u2028 wörld"}),
        ("echo", {}),
        ("tool_error", {}),
        ("fail", {"code": types.INVALID_PARAMS, "message": "bad argument"}),
        ("fail", {"code": -32000, "message": "Connection closed"}),
        ("bad_structured", {}),
        ("ask", {}),
    ]
    seen: list[Any] = []
    for name, arguments in calls:
        try:
            seen.append(outcome(await conn.call_tool(name, arguments)))
        except MCPMuxError as exc:
            seen.append(outcome(exc))
    seen.append(outcome(await conn.read_resource("mem://note")))
    try:
        await conn.read_resource("mem://missing")
    except MCPMuxError as exc:
        seen.append(outcome(exc))
    return seen


async def test_only_a_stdio_session_of_a_handshake_era_takes_the_lean_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(True) as conn:
            assert conn.lean_path
        monkeypatch.setenv("MCPMUX_LEAN_PATH", "0")
        server = StdioServerConfig(name="lean", command=sys.executable, args=(str(SERVER),))
        async with Connection(server, SETTINGS) as conn:
            assert not conn.lean_path
        monkeypatch.delenv("MCPMUX_LEAN_PATH")
        async with MockServer("tcp").tool("echo", result="hi").serve("tcp") as served, served.connection() as conn:
            assert not conn.lean_path  # TCP keeps the stream path
            assert text(await conn.call_tool("echo", {})) == "hi"


async def test_every_kind_of_answer_is_the_same_on_both_paths() -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(True) as lean:
            on_lean = await answers(lean)
        async with connected(False) as sdk:
            on_sdk = await answers(sdk)
    assert on_lean == on_sdk
    structured, echoed, _empty, tool_error, invalid, closed, broken, asked, note, missing = on_lean
    assert structured["structuredContent"] == {"n": 5}
    assert echoed["content"][0]["text"] == "héllo \u2028 wörld"
    assert tool_error["isError"] is True
    assert invalid[0] == closed[0] == ServerError.__name__ and "Connection closed" in closed[1]
    assert broken[0] == ProtocolError.__name__ and "structured content" in broken[1]
    assert asked["content"][0]["text"] == "hello Ada"  # the server's request mid-call was answered
    assert note["contents"][0]["text"] == "hello"
    assert missing[0] == ServerError.__name__


@BOTH
async def test_a_deadline_cancels_the_call_on_the_wire_and_the_server_keeps_serving(lean: bool) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(lean) as conn:
            with pytest.raises(MCPTimeoutError) as caught:
                await conn.call_tool("hang", {}, timeout=0.5)
            assert text(await conn.call_tool("echo", {"text": "still here"})) == "still here"
            await stderr_says(conn, "cancelled")
            cancelled = int(conn.stderr_tail().split("cancelled ")[1].split()[0])
    assert (caught.value.server, caught.value.operation, caught.value.timeout_s) == ("lean", "tools/call", 0.5)
    assert isinstance(caught.value, TimeoutError)
    assert (cancelled > DIRECT_ID_BASE) is lean


@BOTH
async def test_a_caller_cancellation_cancels_the_call_on_the_wire(lean: bool) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(lean) as conn:
            await conn.list_tools()
            with anyio.move_on_after(0.5) as scope:
                await conn.call_tool("hang", {})
            assert scope.cancelled_caught
            await stderr_says(conn, "cancelled")
            assert text(await conn.call_tool("echo", {"text": "after"})) == "after"


@BOTH
async def test_progress_reaches_the_caller(lean: bool) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    all_seen = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))
        if len(seen) == 3:
            all_seen.set()

    with anyio.fail_after(WAIT_S):
        async with connected(lean) as conn:
            await conn.list_tools()
            result = await conn.call_tool("progress", {"steps": 3}, on_progress=on_progress)
            await all_seen.wait()  # progress handlers run in their own tasks
    assert text(result) == "done"
    assert sorted(seen) == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


@BOTH
async def test_a_child_dying_mid_call_fails_it_at_once_with_its_exit(lean: bool) -> None:
    with anyio.fail_after(WAIT_S):
        async with connected(lean) as conn:
            await conn.list_tools()
            with pytest.raises(ServerExited) as caught:
                await conn.call_tool("crash", {})
            with pytest.raises(ServerExited):
                await conn.call_tool("echo", {"text": "too late"})
    assert caught.value.exit_code == 7
    assert "crashing (mock)" in caught.value.stderr_tail
    assert "during tools/call" in str(caught.value)


async def test_fifty_concurrent_calls_each_get_their_own_answer() -> None:
    got: dict[int, str] = {}

    async def call(conn: Connection, i: int) -> None:
        got[i] = text(await conn.call_tool("echo", {"text": f"call {i}"}))

    with anyio.fail_after(WAIT_S):
        async with connected(True) as conn, anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(call, conn, i)
    assert got == {i: f"call {i}" for i in range(50)}
