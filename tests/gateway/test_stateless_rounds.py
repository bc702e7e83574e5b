"""Rounds of one parked stateless-era call (unit): every request waiting on the call gets its answer."""

from __future__ import annotations

from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from anyio.lowlevel import checkpoint

from mcpmux.gateway.stateless import ParkedCall

pytestmark = pytest.mark.anyio


async def test_every_round_waiting_on_a_call_gets_its_result() -> None:
    # Racing retries of one requestState: each waits in its own round; the call's end must wake all
    # of them (each round used to replace the one event the call sets, so all but the last hung).
    call = ParkedCall(cast(Any, None), "client")
    release = anyio.Event()
    texts: list[str] = []

    async def work() -> types.CallToolResult:
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async def one_round() -> None:
        result = await call.round(cast(Any, None), None)
        assert isinstance(result, types.CallToolResult)
        texts.append(cast(types.TextContent, result.content[0]).text)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call.run, work)
            for _ in range(4):
                tg.start_soon(one_round)
            await anyio.wait_all_tasks_blocked()
            await checkpoint()
            release.set()
    assert texts == ["done"] * 4
