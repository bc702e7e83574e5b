"""A server's call slots: a count with a first-come, first-served line, safe against cancellation.

Unit tests of :class:`mcpmux.manager._slots.CallSlots` on the asyncio loop. Each runs with the
asyncio waiter (a future) and with the other backends' waiter (an ``anyio.Event``), which runs on
asyncio too. The manager's own tests (``test_manager.py``) cover the slots behind real calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import pytest

from mcpmux.manager._slots import CallSlots

pytestmark = pytest.mark.anyio

Wait = Callable[[CallSlots], Awaitable[None]]
WAITERS: dict[str, Wait] = {"future": CallSlots.wait, "event": CallSlots._wait_turn}


@pytest.fixture(params=list(WAITERS))
def wait(request: pytest.FixtureRequest) -> Wait:
    return WAITERS[request.param]


async def test_a_released_slot_goes_to_the_first_in_line_and_no_newcomer_overtakes(wait: Wait) -> None:
    slots = CallSlots(2)
    assert slots.take() and slots.take() and not slots.take()
    served: list[int] = []

    async def queued(n: int) -> None:
        await wait(slots)
        served.append(n)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(queued, n)
                await anyio.wait_all_tasks_blocked()
            assert slots.queued == 3 and slots.used == 2
            slots.release()  # handed to 0, not freed
            assert slots.used == 2 and not slots.take()  # a newcomer waits behind 1 and 2
            await anyio.wait_all_tasks_blocked()
            slots.release()
            slots.release()
    assert served == [0, 1, 2] and slots.used == 2 and slots.queued == 0
    slots.release()
    slots.release()
    assert slots.used == 0 and slots.take()


async def test_a_caller_cancelled_in_line_leaves_it_holding_nothing(wait: Wait) -> None:
    slots = CallSlots(1)
    assert slots.take()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(wait, slots)
            await anyio.wait_all_tasks_blocked()
            assert slots.queued == 1
            tg.cancel_scope.cancel()
    assert slots.queued == 0 and slots.used == 1
    slots.release()
    assert slots.used == 0 and slots.take()


async def test_a_slot_handed_to_a_task_cancelled_before_it_resumes_is_given_back(wait: Wait) -> None:
    # A plain asyncio cancel lands even though the wait was already answered (anyio's cancel
    # scopes let such a task run on to its next checkpoint instead: the next test).
    slots = CallSlots(1)
    assert slots.take()
    with anyio.fail_after(10):
        task = asyncio.ensure_future(wait(slots))
        await anyio.wait_all_tasks_blocked()
        slots.release()  # handed over...
        task.cancel()  # ...and the task cancelled before it resumes
        with pytest.raises(asyncio.CancelledError):
            await task
    assert slots.used == 0 and slots.queued == 0
    assert slots.take()


async def test_a_caller_whose_scope_is_cancelled_as_it_is_handed_a_slot_runs_on_and_gives_it_back(
    wait: Wait,
) -> None:
    slots = CallSlots(1)
    assert slots.take()
    held: list[bool] = []

    async def call() -> None:
        await wait(slots)
        try:
            held.append(True)
            await anyio.sleep_forever()  # the call itself, where the cancellation lands
        finally:
            slots.release()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            slots.release()
            tg.cancel_scope.cancel()
    assert held == [True] and slots.used == 0 and slots.queued == 0


async def test_a_handed_slot_skips_callers_already_cancelled(wait: Wait) -> None:
    slots = CallSlots(1)
    assert slots.take()
    got: list[str] = []

    async def named(name: str) -> None:
        await wait(slots)
        got.append(name)
        slots.release()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as gone:
                async with anyio.create_task_group() as doomed:
                    doomed.start_soon(named, "cancelled")
                    await anyio.wait_all_tasks_blocked()
                    tg.start_soon(named, "next")
                    await anyio.wait_all_tasks_blocked()
                    gone.cancel()
            slots.release()
    assert got == ["next"] and slots.used == 0 and slots.queued == 0


def test_releasing_more_than_was_taken_is_a_bug_and_says_so() -> None:
    slots = CallSlots(1)
    with pytest.raises(RuntimeError, match="released more often than taken"):
        slots.release()
    with pytest.raises(ValueError, match="at least 1"):
        CallSlots(0)
