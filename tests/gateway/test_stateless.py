"""Parked stateless-era calls (:mod:`mcpmux.gateway.stateless`) under concurrent rounds, in process."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.gateway.stateless import ParkedCall

pytestmark = pytest.mark.anyio


class _Session:
    def check_client_capability(self, wanted: types.ClientCapabilities) -> bool:
        return True

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


class _Ctx:
    session = _Session()


async def test_every_round_waiting_on_a_call_gets_its_result() -> None:
    # Two retries of one requestState (a replay racing the real one) both wait in round(): each
    # round used to replace the event the other waited on, so one never woke up.
    release = anyio.Event()
    call = ParkedCall(_Ctx(), "token:alice")  # type: ignore[arg-type]

    async def work() -> types.CallToolResult:
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    results: list[Any] = []

    async def round_() -> None:
        results.append(await call.round(_Ctx(), None))  # type: ignore[arg-type]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call.run, work)
            for _ in range(3):
                tg.start_soon(round_)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert [r.content[0].text for r in results] == ["done"] * 3


async def test_a_round_that_leaves_cancels_the_call_only_when_no_other_round_waits() -> None:
    release = anyio.Event()
    call = ParkedCall(_Ctx(), "token:alice")  # type: ignore[arg-type]

    async def work() -> types.CallToolResult:
        await release.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    results: list[Any] = []

    async def round_() -> None:
        results.append(await call.round(_Ctx(), None))  # type: ignore[arg-type]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call.run, work)
            tg.start_soon(round_)
            async with anyio.create_task_group() as leaving:
                leaving.start_soon(round_)
                await anyio.wait_all_tasks_blocked()
                leaving.cancel_scope.cancel()  # one round leaves; the other still waits
            release.set()
    assert [r.content[0].text for r in results] == ["done"]

    alone = ParkedCall(_Ctx(), "token:alice")  # type: ignore[arg-type]

    async def forever() -> types.CallToolResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def alone_round() -> None:
        await alone.round(_Ctx(), None)  # type: ignore[arg-type]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(alone.run, forever)
            async with anyio.create_task_group() as leaving:
                leaving.start_soon(alone_round)
                await anyio.wait_all_tasks_blocked()
                leaving.cancel_scope.cancel()  # the only round leaves: the call is cancelled
    with pytest.raises(Exception, match="cancelled"):
        await alone.round(_Ctx(), None)  # type: ignore[arg-type]
