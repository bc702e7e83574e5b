"""The queue of calls held for a person: answers reach the waiting call at once; no answer in time is "no"."""

from __future__ import annotations

import anyio
import pytest

from mcpmux.errors import NotFound
from mcpmux.policy import Answer, ApprovalRequest
from mcpmux.policy.pending import PendingApprovals

pytestmark = pytest.mark.anyio

REQUEST = ApprovalRequest("fs:write", "fs", "write", {"path": "a", "token": "sk-123"}, "rule x", face="gateway",
                          caller="token:bot")  # fmt: skip


async def _held(pending: PendingApprovals) -> str:
    async with pending.changes() as events:
        with anyio.fail_after(10):
            while not pending.held():
                await events.receive()
    return pending.held()[0].id


@pytest.mark.parametrize("answer", [Answer.YES, Answer.ALWAYS_TOOL, Answer.NO])
async def test_the_answer_reaches_the_waiting_call(answer: Answer) -> None:
    pending = PendingApprovals(timeout_s=60)
    got: list[Answer] = []
    async with anyio.create_task_group() as tg:

        async def wait() -> None:
            got.append(await pending(REQUEST))

        tg.start_soon(wait)
        held = pending.answer(await _held(pending), answer, by="console:token:alice")
        assert held.answered_by == "console:token:alice"
    assert got == [answer]
    assert pending.held() == []


async def test_no_answer_in_time_is_no() -> None:
    pending = PendingApprovals(timeout_s=0.05)
    with anyio.fail_after(10):
        assert await pending(REQUEST) is Answer.NO
    assert pending.held() == []


async def test_shown_arguments_are_redacted_and_ids_are_unguessable() -> None:
    pending = PendingApprovals(timeout_s=60, secrets=["sk-123"])
    async with anyio.create_task_group() as tg:
        tg.start_soon(pending, REQUEST)
        held_id = await _held(pending)
        shown = pending.held()[0].to_json()
        assert "sk-123" not in str(shown) and shown["caller"] == "token:bot" and shown["rule"] == "rule x"
        assert len(held_id) >= 16
        pending.answer(held_id, Answer.NO, by="x")


async def test_an_answer_to_an_unknown_or_answered_call_is_not_found() -> None:
    pending = PendingApprovals(timeout_s=60)
    with pytest.raises(NotFound):
        pending.answer("nope", Answer.YES, by="x")
    async with anyio.create_task_group() as tg:
        tg.start_soon(pending, REQUEST)
        held_id = await _held(pending)
        pending.answer(held_id, Answer.YES, by="x")
        with pytest.raises(NotFound):
            pending.answer(held_id, Answer.NO, by="y")


async def test_a_cancelled_wait_leaves_nothing_held_and_says_so() -> None:
    pending = PendingApprovals(timeout_s=60)
    async with pending.changes() as events, anyio.create_task_group() as tg:
        tg.start_soon(pending, REQUEST)
        await _held(pending)
        assert await events.receive() == "held"
        tg.cancel_scope.cancel()
    assert pending.held() == []
