"""Waiting for a child's exit once for everyone, and stopping its whole process group."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio
import anyio.lowlevel
import psutil
import pytest
from anyio.abc import Process

from mcpmux.transports import _process
from mcpmux.transports._process import ExitWatch, stop_process
from tests.transports.conftest import WAIT_S

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.subprocess,
    pytest.mark.skipif(sys.platform == "win32", reason="process groups"),
]

# Exits when its stdin closes, as a well-behaved stdio server does.
UNTIL_EOF = "import sys; sys.stdin.read()"
# Ignores its stdin's end and SIGTERM: only SIGKILL ends it.
STUBBORN = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); sys.stdin.read(); time.sleep(60)"


@asynccontextmanager
async def child(code: str) -> AsyncIterator[Process]:
    """A Python child running ``code`` in a process group of its own; killed and reaped whatever happens."""
    process = await anyio.open_process(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
            await process.aclose()


def gone_or_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


class CountedWaits:
    """Counts the low-level waits for an exit (each one a pidfd and a poll)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = _process.wait_exit

        async def counted(process: Process) -> int:
            self.count += 1
            return await original(process)

        monkeypatch.setattr(_process, "wait_exit", counted)


async def test_every_waiter_of_one_watch_sees_the_exit_through_one_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = CountedWaits(monkeypatch)
    codes: list[int] = []
    with anyio.fail_after(WAIT_S):
        async with child(UNTIL_EOF) as process:
            watch = ExitWatch(process)

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(_collect, watch, codes)
                await anyio.wait_all_tasks_blocked()
                assert process.stdin is not None
                await process.stdin.aclose()
    assert codes == [0, 0, 0]
    assert waits.count == 1


async def test_a_cancelled_watcher_hands_the_watch_to_the_next_waiter() -> None:
    codes: list[int] = []
    with anyio.fail_after(WAIT_S):
        async with child(UNTIL_EOF) as process:
            watch = ExitWatch(process)

            async with anyio.create_task_group() as tg:
                first = anyio.CancelScope()
                tg.start_soon(_cancellable_wait, watch, first)
                await anyio.wait_all_tasks_blocked()
                tg.start_soon(_collect, watch, codes)
                await anyio.wait_all_tasks_blocked()
                first.cancel()
                await anyio.wait_all_tasks_blocked()
                process.kill()
    assert codes == [-signal.SIGKILL]


async def _collect(watch: ExitWatch, codes: list[int]) -> None:
    codes.append(await watch.wait())


async def _cancellable_wait(watch: ExitWatch, scope: anyio.CancelScope) -> None:
    with scope:
        await watch.wait()


async def test_a_watch_of_an_exited_child_returns_its_code_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    with anyio.fail_after(WAIT_S):
        async with child("raise SystemExit(3)") as process:
            assert await ExitWatch(process).wait() == 3
            waits = CountedWaits(monkeypatch)
            assert await ExitWatch(process).wait() == 3
    assert waits.count == 0


async def test_stopping_an_already_exited_child_returns_at_once() -> None:
    with anyio.fail_after(WAIT_S):
        async with child("pass") as process:
            watch = ExitWatch(process)
            await watch.wait()
            await stop_process(process, watch=watch)
    assert process.returncode == 0


async def _stop_beside_a_waiter(process: Process, watch: ExitWatch) -> list[int]:
    """Stop ``process`` (its stdin closed first) while another task waits on ``watch``; the codes it saw."""
    codes: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_collect, watch, codes)
        await anyio.wait_all_tasks_blocked()
        assert process.stdin is not None
        await process.stdin.aclose()
        await stop_process(process, watch=watch)
    return codes


async def test_a_stop_shares_the_watch_of_the_exit_reporter(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = CountedWaits(monkeypatch)
    with anyio.fail_after(WAIT_S):
        async with child(UNTIL_EOF) as process:
            codes = await _stop_beside_a_waiter(process, ExitWatch(process))
    assert codes == [0]
    assert process.returncode == 0
    assert waits.count == 1


async def test_a_child_killed_while_being_stopped_is_reaped() -> None:
    with anyio.fail_after(WAIT_S):
        async with child(STUBBORN) as process:
            watch = ExitWatch(process)
            assert process.stdin is not None
            await process.stdin.aclose()
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch.wait)  # the reporter's wait, under way when the stop begins
                tg.start_soon(partial(stop_process, process, watch=watch))
                await anyio.wait_all_tasks_blocked()
                process.kill()
    assert process.returncode == -signal.SIGKILL


async def test_the_stop_of_a_reporter_cancelled_with_the_session_still_reaps_the_child() -> None:
    with anyio.fail_after(WAIT_S):
        async with child(UNTIL_EOF) as process:
            watch = ExitWatch(process)
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch.wait)
                await anyio.wait_all_tasks_blocked()
                tg.cancel_scope.cancel()
            assert process.stdin is not None
            await process.stdin.aclose()
            await stop_process(process, watch=watch)
    assert process.returncode == 0


@pytest.mark.slow
async def test_a_stop_kills_the_whole_process_group() -> None:
    grandchild_code = STUBBORN.replace("sys.stdin.read(); ", "")
    spawn = f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {grandchild_code!r}]); "
    spawn += "print(p.pid, flush=True); sys.stdin.read()"
    with anyio.fail_after(WAIT_S):
        async with child(spawn) as process:
            assert process.stdout is not None and process.stdin is not None
            grandchild = int((await process.stdout.receive()).decode())
            watch = ExitWatch(process)
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch.wait)
                await process.stdin.aclose()
                await stop_process(process, watch=watch)
            assert process.returncode == 0
            # SIGKILLed (it ignores SIGTERM) as the stop returns; its end follows the signal.
            while not gone_or_zombie(grandchild):  # noqa: ASYNC110
                await anyio.sleep(0.05)


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


class Notices:
    """The exit-notice callback: counts its calls and wakes a waiter."""

    def __init__(self) -> None:
        self.calls = 0
        self.called = anyio.Event()

    def __call__(self) -> None:
        self.calls += 1
        self.called.set()


async def _turns(count: int = 20) -> None:
    """Let the event loop run its ready callbacks, ``count`` times."""
    for _ in range(count):
        await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def notified_child() -> AsyncIterator[tuple[Process, ExitWatch, Notices, str]]:
    """A child that exits at its stdin's end, its watch notifying a :class:`Notices`, and the watch's pidfd."""
    notices = Notices()
    async with child(UNTIL_EOF) as process:
        fds = _open_fds()
        watch = ExitWatch(process)
        assert watch.notify(asyncio.get_running_loop(), notices)
        (pidfd,) = _open_fds() - fds
        yield process, watch, notices, pidfd


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd: Linux")
async def test_a_notified_watch_calls_back_once_at_the_exit_and_releases_its_pidfd() -> None:
    with anyio.fail_after(WAIT_S):
        async with notified_child() as (process, watch, notices, pidfd):
            await _turns()  # the child runs: no call
            assert notices.calls == 0
            assert process.stdin is not None
            await process.stdin.aclose()
            await notices.called.wait()
            assert pidfd not in _open_fds()  # closed before the callback ran
            assert await watch.wait() == 0  # the code comes a moment after the notice
            watch.close()  # idempotent
            await _turns()
    assert notices.calls == 1


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd: Linux")
async def test_a_silenced_watch_does_not_call_back_and_its_waiters_share_its_pidfd(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits = CountedWaits(monkeypatch)
    with anyio.fail_after(WAIT_S):
        async with notified_child() as (process, watch, notices, _):
            watch.silence()  # the transport is closing: the exit is not reported
            codes = await _stop_beside_a_waiter(process, watch)
            await _turns()
            watch.close()
    assert codes == [0]
    assert process.returncode == 0
    assert notices.calls == 0
    assert waits.count == 0  # no pidfd or poll of their own: the watch's reader woke them


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="pidfd: Linux")
async def test_a_closed_watch_never_calls_back_and_its_waiters_still_see_the_exit() -> None:
    codes: list[int] = []
    with anyio.fail_after(WAIT_S):
        async with notified_child() as (process, watch, notices, pidfd), anyio.create_task_group() as tg:
            tg.start_soon(_collect, watch, codes)  # waiting on the reader when it is closed
            await anyio.wait_all_tasks_blocked()
            watch.close()
            assert pidfd not in _open_fds()
            assert process.stdin is not None
            await process.stdin.aclose()
            assert await watch.wait() == 0  # back to a wait of its own
            await _turns()
    assert codes == [0]
    assert notices.calls == 0


async def test_no_notice_for_a_child_already_reaped() -> None:
    notices = Notices()
    with anyio.fail_after(WAIT_S):
        async with child("pass") as process:
            watch = ExitWatch(process)
            await watch.wait()
            fds = _open_fds()
            assert not watch.notify(asyncio.get_running_loop(), notices)  # the caller waits in a task instead
            assert _open_fds() == fds
    assert notices.calls == 0
