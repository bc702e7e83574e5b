"""Attacks on a server's call slots: floods past the queue, callers hanging up in line, deadlines in line.

A real child (``tests/fixtures/hostile_answers_server.py``: ``neither`` is never answered, ``echo``
is) behind a real :class:`~mcpmux.manager.Manager` with 2 call slots and a line of 4. Whatever the
callers do, the slots must come back: afterwards exactly 2 calls run and 4 wait again before
:class:`~mcpmux.errors.Busy`, and honest calls are answered.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.errors import Busy, MCPTimeoutError
from mcpmux.manager import Manager

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "hostile_answers_server.py"
WAIT_S = 90
SLOTS, LINE = 2, 4


@asynccontextmanager
async def hostile() -> AsyncIterator[Manager]:
    server = StdioServerConfig(name="hostile", command=sys.executable, args=(str(SERVER),))
    settings = Settings(timeout_ms=120_000, connect_timeout_ms=30_000, max_concurrent_calls=SLOTS,
                        max_queued_calls=LINE)  # fmt: skip
    async with Manager(Config(servers=(server,), settings=settings), catalog=False) as mux:
        yield mux


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def fill(mux: Manager, tg: anyio.abc.TaskGroup) -> None:
    """Take every slot and every place in line with calls that are never answered."""
    for _ in range(SLOTS + LINE):
        tg.start_soon(mux.call_tool, "hostile:neither")
        await anyio.wait_all_tasks_blocked()


async def assert_slots_whole(mux: Manager) -> None:
    """Exactly SLOTS calls run and LINE wait before Busy; then every one of them is let go."""
    async with anyio.create_task_group() as tg:
        await fill(mux, tg)
        with pytest.raises(Busy, match=f"{SLOTS} calls running and {LINE} queued") as caught:
            await mux.call_tool("hostile:echo", {"text": "one too many"})
        assert "max_concurrent_calls" in (caught.value.hint or "")
        tg.cancel_scope.cancel()
    assert text(await mux.call_tool("hostile:echo", {"text": "still here"})) == "still here"


async def test_a_flood_past_the_line_is_refused_at_once_and_the_slots_survive_it() -> None:
    with anyio.fail_after(WAIT_S):
        async with hostile() as mux:
            async with anyio.create_task_group() as tg:
                await fill(mux, tg)
                refused = 0
                for n in range(200):
                    try:
                        await mux.call_tool("hostile:echo", {"text": str(n)})
                    except Busy:
                        refused += 1
                assert refused == 200
                tg.cancel_scope.cancel()
            await assert_slots_whole(mux)


async def test_callers_hanging_up_in_line_and_while_running_give_every_slot_back() -> None:
    with anyio.fail_after(WAIT_S):
        async with hostile() as mux:
            for _ in range(5):  # waves of clients that queue and then hang up, in every order
                async with anyio.create_task_group() as tg:
                    await fill(mux, tg)
                    tg.cancel_scope.cancel()
            async with anyio.create_task_group() as holders:  # both slots held throughout
                for _ in range(SLOTS):
                    holders.start_soon(mux.call_tool, "hostile:neither")
                await anyio.wait_all_tasks_blocked()
                for _ in range(3):  # the line fills and hangs up under the running calls
                    async with anyio.create_task_group() as line:
                        for _ in range(LINE):
                            line.start_soon(mux.call_tool, "hostile:neither")
                        await anyio.wait_all_tasks_blocked()
                        with pytest.raises(Busy, match=f"{SLOTS} calls running and {LINE} queued"):
                            await mux.call_tool("hostile:echo", {"text": "one too many"})
                        line.cancel_scope.cancel()
                holders.cancel_scope.cancel()
            await assert_slots_whole(mux)


async def test_calls_timing_out_in_their_slots_let_the_line_through_in_order() -> None:
    answered: list[str] = []

    async def echo(n: int) -> None:
        answered.append(text(await mux.call_tool("hostile:echo", {"text": str(n)})))

    async def stuck() -> None:
        with pytest.raises(MCPTimeoutError):
            await mux.call_tool("hostile:neither", timeout=1.0)

    with anyio.fail_after(WAIT_S):
        async with hostile() as mux:
            async with anyio.create_task_group() as tg:
                for _ in range(SLOTS):
                    tg.start_soon(stuck)
                await anyio.wait_all_tasks_blocked()
                for n in range(LINE):
                    tg.start_soon(echo, n)
                    await anyio.wait_all_tasks_blocked()
            assert sorted(answered) == [str(n) for n in range(LINE)]
            await assert_slots_whole(mux)
