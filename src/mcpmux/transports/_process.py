"""Waiting for and stopping a child server and its whole process group (POSIX and Windows)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from contextlib import suppress

import anyio
from anyio.abc import Process

from mcpmux.servers._reaper import KILL_SIGNAL as REAPER_KILL_SIGNAL

__all__ = ["CLOSE_GRACE_S", "KILL_GRACE_S", "ExitNotice", "ExitWatch", "stop_process", "wait_exit"]

logger = logging.getLogger("mcpmux.transports")

CLOSE_GRACE_S = 2.0
KILL_GRACE_S = 2.0
REAP_GRACE_S = 2.0
POLL_INTERVAL_S = 0.02


async def wait_exit(process: Process) -> int:
    """Wait until ``process`` has exited and return its exit code (negative: killed by a signal).

    Not ``process.wait()``: on asyncio it also waits for the pipes' EOF, which a grandchild holding
    them would delay forever. Linux wakes us through a pidfd; elsewhere we poll.
    """
    code = process.returncode
    if code is not None:
        return code
    pidfd = _open_pidfd(process.pid)
    try:
        if pidfd is not None and process.returncode is None:
            await anyio.wait_readable(pidfd)
        # The event loop's child watcher sets returncode a moment after the pidfd wakes us.
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(POLL_INTERVAL_S)
        return process.returncode
    finally:
        if pidfd is not None:
            os.close(pidfd)


class ExitNotice:
    """Calls ``callback`` from the asyncio ``loop`` once ``process`` has exited: a loop reader on its
    pidfd, so nothing waits in a task until the exit (see :meth:`start`).

    The callback runs at most once, and never after :meth:`close`. The process's ``returncode``
    may still be ``None`` when it runs: the event loop's child watcher sets it a moment later
    (:meth:`ExitWatch.wait` waits for it).
    """

    __slots__ = ("_callback", "_loop", "_pidfd")

    def __init__(self, loop: asyncio.AbstractEventLoop, pidfd: int, callback: Callable[[], object]) -> None:
        self._loop, self._pidfd, self._callback = loop, pidfd, callback

    @classmethod
    def start(
        cls, process: Process, loop: asyncio.AbstractEventLoop, callback: Callable[[], object]
    ) -> ExitNotice | None:
        """Watch ``process`` for its exit; ``None`` without a pidfd (not Linux, or the child was already
        reaped), when the caller must wait for the exit in a task (:meth:`ExitWatch.wait`)."""
        pidfd = _open_pidfd(process.pid)
        if pidfd is None:
            return None
        notice = cls(loop, pidfd, callback)
        try:
            loop.add_reader(pidfd, notice._exited)
        except BaseException:
            os.close(pidfd)
            raise
        return notice

    def _exited(self) -> None:
        if self._pidfd >= 0:
            self.close()
            self._callback()

    def close(self) -> None:
        """Stop watching (idempotent): the callback will not run."""
        pidfd, self._pidfd = self._pidfd, -1
        if pidfd >= 0:
            self._loop.remove_reader(pidfd)
            os.close(pidfd)


class ExitWatch:
    """One wait for a child's exit, shared by everyone who waits for it (the stdio exit reporter, :func:`stop_process`).

    The first waiter watches (:func:`wait_exit`: one pidfd, one poll); a later one waits for it.
    A watcher that is cancelled hands the watch to the next waiter, so a waiter still returns
    once the child has exited, whoever else gave up.
    """

    def __init__(self, process: Process) -> None:
        self.process = process
        self._watching = False
        self._handover: anyio.Event | None = None
        """Set when the watcher stops watching (the child exited, or it was cancelled)."""

    async def wait(self) -> int:
        """Wait until the child has exited and return its exit code (negative: killed by a signal)."""
        while (code := self.process.returncode) is None:
            if not self._watching:
                return await self._watch()
            if self._handover is None:
                self._handover = anyio.Event()
            await self._handover.wait()
        return code

    async def _watch(self) -> int:
        self._watching = True
        try:
            return await wait_exit(self.process)
        finally:
            self._watching = False
            handover, self._handover = self._handover, None
            if handover is not None:
                handover.set()


async def stop_process(process: Process, *, reaper: bool = False, watch: ExitWatch | None = None) -> None:
    """Stop the child and everything it spawned, bounded in time; call with stdin already closed.

    The child gets :data:`CLOSE_GRACE_S` to exit on its own, then its process group is sent
    SIGTERM and, after :data:`KILL_GRACE_S`, SIGKILL. The group is signalled even when the child
    exited by itself, so no grandchild outlives the connection. With ``reaper`` (the child is
    :mod:`mcpmux.servers._reaper`), the reaper is told to kill every descendant before the
    group's SIGKILL, which would kill the reaper and orphan what left the group. The child's exit
    is waited for through ``watch``, shared with whoever else waits for it (a new one by default).
    """
    watch = watch or ExitWatch(process)
    if process.returncode is None:
        with anyio.move_on_after(CLOSE_GRACE_S):
            await watch.wait()
    if sys.platform == "win32":  # pragma: no cover - no process groups to signal
        if process.returncode is None:
            process.kill()
    else:
        await _terminate_group(process, reaper, watch)
    if process.returncode is None:
        with anyio.move_on_after(REAP_GRACE_S):
            await watch.wait()
    if process.returncode is None:
        logger.warning("process %d survived SIGKILL; abandoning it", process.pid)


async def _terminate_group(process: Process, reaper: bool, watch: ExitWatch) -> None:
    # The leader's pid is the group id (start_new_session); getpgid() would fail once it is reaped.
    pgid = process.pid
    if not _signal_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(KILL_GRACE_S):
        await _group_gone(pgid, process)
    if reaper and process.returncode is None:
        with suppress(ProcessLookupError):
            os.kill(pgid, REAPER_KILL_SIGNAL)
        with anyio.move_on_after(KILL_GRACE_S):
            await watch.wait()
    _signal_group(pgid, signal.SIGKILL)


async def _group_gone(pgid: int, process: Process) -> None:
    # Nothing notifies us when the last member of a group dies: poll.
    while _signal_group(pgid, 0) and not (process.returncode is not None and _only_zombies(pgid)):  # noqa: ASYNC110
        await anyio.sleep(POLL_INTERVAL_S)


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False once no member is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        logger.debug("no permission to signal some of process group %d", pgid)
    return True


def _only_zombies(pgid: int) -> bool:
    """Whether every live member of the group is a zombie (an init that does not reap leaves them)."""
    if not os.path.isdir("/proc"):
        return False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with suppress(OSError, IndexError, ValueError):
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return False
    return True


def _open_pidfd(pid: int) -> int | None:
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:
        return None  # already reaped, or a kernel without pidfd: fall back to polling
    return fd
