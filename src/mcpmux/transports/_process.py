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

from mcpmux.processes._reaper import KILL_SIGNAL as REAPER_KILL_SIGNAL

__all__ = ["CLOSE_GRACE_S", "KILL_GRACE_S", "ExitWatch", "stop_process", "wait_exit"]

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


class ExitWatch:
    """One wait for a child's exit, shared by everyone who waits for it (the stdio exit reporter, :func:`stop_process`).

    On asyncio (Linux) the transport makes it a loop reader on the child's pidfd (:meth:`notify`):
    nothing waits in a task until the exit, and every waiter waits for that reader. Otherwise the
    first waiter watches (:func:`wait_exit`: one pidfd, one poll) and a later one waits for it; a
    watcher that is cancelled hands the watch to the next waiter, so a waiter still returns once
    the child has exited, whoever else gave up.
    """

    def __init__(self, process: Process) -> None:
        self.process = process
        self._watching = False
        self._handover: anyio.Event | None = None
        """Set when the watcher stops watching (the child exited, or it was cancelled)."""
        self._reader: tuple[asyncio.AbstractEventLoop, int] | None = None
        """The loop and pidfd of :meth:`notify`, until the exit or :meth:`close`."""
        self._on_exit: Callable[[], object] | None = None
        self._exited = False
        """The reader saw the exit (the child watcher sets ``returncode`` a moment later)."""
        self._seen: anyio.Event | None = None
        """Set when the reader sees the exit or is closed; made when first waited for."""

    def notify(self, loop: asyncio.AbstractEventLoop, on_exit: Callable[[], object]) -> bool:
        """Call ``on_exit`` from ``loop`` once the child has exited (at most once, and not after
        :meth:`silence` or :meth:`close`); its ``returncode`` may still be ``None`` then.

        Returns ``False`` without a pidfd (not Linux, or the child was already reaped): the caller
        then waits for the exit in a task (:meth:`wait`). Call :meth:`close` when done.
        """
        pidfd = _open_pidfd(self.process.pid)
        if pidfd is None:
            return False
        try:
            loop.add_reader(pidfd, self._readable)
        except BaseException:
            os.close(pidfd)
            raise
        self._reader, self._on_exit = (loop, pidfd), on_exit
        return True

    def silence(self) -> None:
        """Drop the ``on_exit`` of :meth:`notify`; waiters still wake at the exit."""
        self._on_exit = None

    def close(self) -> None:
        """Remove the reader of :meth:`notify` and close its pidfd (idempotent). A waiter still
        waiting then watches by itself (:meth:`wait`)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            loop, pidfd = reader
            loop.remove_reader(pidfd)
            os.close(pidfd)
        seen, self._seen = self._seen, None
        if seen is not None:
            seen.set()

    def _readable(self) -> None:
        self._exited = True
        self.close()
        on_exit, self._on_exit = self._on_exit, None
        if on_exit is not None:
            on_exit()

    async def wait(self) -> int:
        """Wait until the child has exited and return its exit code (negative: killed by a signal)."""
        while (code := self.process.returncode) is None:
            if self._exited:
                await anyio.sleep(POLL_INTERVAL_S)  # the child watcher sets returncode a moment after the pidfd
            elif self._reader is not None:
                if self._seen is None:
                    self._seen = anyio.Event()
                await self._seen.wait()
            elif not self._watching:
                return await self._watch()
            else:
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
    :mod:`mcpmux.processes._reaper`), the reaper is told to kill every descendant before the
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
