"""Attacks on the lean path's reader: a hostile child forging, repeating, reordering and breaking answers.

The child is ``tests/fixtures/hostile_answers_server.py`` (hand-written JSON-RPC: no SDK server
would send these). Each attack runs on the lean path and on the SDK's path (``lean=False``), and
both must end the same way: the same answer, or the same error; the session must survive where
the SDK's does, and a forged answer must never reach a call it does not answer.
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
from mcpmux.connection import Connection
from mcpmux.errors import MCPMuxError, MCPTimeoutError, ServerExited

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_answers_server.py"
WAIT_S = 60
SETTINGS = Settings(timeout_ms=120_000, connect_timeout_ms=30_000)
BOTH = pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
# Attacks whose call must end before its deadline; "neither" and "null_result" leave it unanswered
# (the line is not a JSON-RPC answer: logged and ignored, as by the SDK), so they get a short one.
ANSWERED = ("forge_next", "duplicate", "request_same_id", "string_id", "both", "truncated", "wrong_shape")


@asynccontextmanager
async def hostile(lean: bool) -> AsyncIterator[Connection]:
    server = StdioServerConfig(name="hostile", command=sys.executable, args=(str(SERVER),))
    async with Connection(server, SETTINGS, lean=lean) as conn:
        assert conn.lean_path is lean
        await conn.list_tools()
        yield conn


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def attack(conn: Connection, tool: str, timeout: float | None = None) -> Any:
    """What the caller sees of ``tool``, then of an honest call after it (the session must go on)."""
    try:
        seen: Any = text(await conn.call_tool(tool, {}, timeout=timeout))
    except MCPMuxError as exc:
        seen = (type(exc).__name__, str(exc).replace(str(timeout), "T"))
    after = text(await conn.call_tool("echo", {"text": f"after {tool}"}))
    return seen, after


@pytest.mark.slow
async def test_every_hostile_answer_ends_the_same_on_both_paths() -> None:
    outcomes: dict[bool, list[Any]] = {}
    with anyio.fail_after(WAIT_S):
        for lean in (True, False):
            async with hostile(lean) as conn:
                seen = [await attack(conn, tool) for tool in ANSWERED]
                seen += [await attack(conn, tool, timeout=0.5) for tool in ("neither", "null_result")]
            outcomes[lean] = seen
    assert outcomes[True] == outcomes[False]
    by_tool = dict(zip((*ANSWERED, "neither", "null_result"), outcomes[True], strict=True))
    for tool, (_, after) in by_tool.items():
        assert after == f"after {tool}", tool  # the session survived, and the next call got its own answer
    assert by_tool["forge_next"][0] == "ok"  # the forged answer reached nobody
    assert by_tool["duplicate"][0] == "ok"
    assert by_tool["request_same_id"][0] == "ok"  # the server's request with our id was answered, not taken
    assert by_tool["string_id"][0] == "ok"
    assert by_tool["truncated"][0] == "ok"  # the broken line was skipped, the whole one taken
    assert by_tool["wrong_shape"][0][0] == "ProtocolError"
    assert by_tool["neither"][0][0] == by_tool["null_result"][0][0] == MCPTimeoutError.__name__


@BOTH
async def test_answers_out_of_order_reach_their_own_calls(lean: bool) -> None:
    got: dict[int, str] = {}

    async def call(conn: Connection, i: int) -> None:
        got[i] = text(await conn.call_tool("reordered", {"n": 20, "text": f"call {i}"}))

    with anyio.fail_after(WAIT_S):
        async with hostile(lean) as conn, anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(call, conn, i)
    assert got == {i: f"call {i}" for i in range(20)}


@BOTH
async def test_a_child_exiting_in_the_middle_of_an_answer_fails_the_call_with_its_exit(lean: bool) -> None:
    with anyio.fail_after(WAIT_S):
        async with hostile(lean) as conn:
            with pytest.raises(ServerExited) as caught:
                await conn.call_tool("half_line_then_exit", {})
    assert caught.value.exit_code == 3


async def test_a_forged_answer_for_every_future_id_reaches_no_call() -> None:
    # forge_next answers the id after its own first: on the lean path that is the next call's id.
    with anyio.fail_after(WAIT_S):
        async with hostile(True) as conn:
            for i in range(5):
                assert text(await conn.call_tool("forge_next", {})) == "ok"
                assert text(await conn.call_tool("echo", {"text": f"mine {i}"})) == f"mine {i}"


@pytest.mark.slow
@BOTH
async def test_a_child_that_stops_reading_cannot_hold_a_call_past_its_deadline(lean: bool) -> None:
    # The request's write waits for room in the pipe; the deadline covers that wait too. On the SDK's
    # path the tool is listed first (a listed tool's call takes its inlined hot path).
    with anyio.fail_after(WAIT_S):
        async with hostile(lean) as conn:
            await conn.call_tool("echo", {"text": "listed"}, timeout=WAIT_S)
            with pytest.raises(MCPTimeoutError):
                await conn.call_tool("stop_reading", {}, timeout=0.5)
            with pytest.raises(MCPTimeoutError) as caught:
                await conn.call_tool("echo", {"text": "x" * (4 << 20)}, timeout=1.0)
    assert caught.value.timeout_s == 1.0
