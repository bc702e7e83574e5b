"""Waiting for and stopping a child server and its whole process group (POSIX and Windows)."""

from __future__ import annotations

import logging
import os
import signal
import sys
from contextlib import suppress

import anyio
from anyio.abc import Process

from mcpmux.servers._reaper import KILL_SIGNAL as REAPER_KILL_SIGNAL

__all__ = ["CLOSE_GRACE_S", "KILL_GRACE_S", "stop_process", "wait_exit"]

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


async def stop_process(process: Process, *, reaper: bool = False) -> None:
    """Stop the child and everything it spawned, bounded in time; call with stdin already closed.

    The child gets :data:`CLOSE_GRACE_S` to exit on its own, then its process group is sent
    SIGTERM and, after :data:`KILL_GRACE_S`, SIGKILL. The group is signalled even when the child
    exited by itself, so no grandchild outlives the connection. With ``reaper`` (the child is
    :mod:`mcpmux.servers._reaper`), the reaper is told to kill every descendant before the
    group's SIGKILL, which would kill the reaper and orphan what left the group. The child's exit
    is waited for here (:func:`wait_exit`), whoever else watches it.
    """
    if process.returncode is None:
        with anyio.move_on_after(CLOSE_GRACE_S):
            await wait_exit(process)
    if sys.platform == "win32":  # pragma: no cover - no process groups to signal
        if process.returncode is None:
            process.kill()
    else:
        await _terminate_group(process, reaper)
    if process.returncode is None:
        with anyio.move_on_after(REAP_GRACE_S):
            await wait_exit(process)
    if process.returncode is None:
        logger.warning("process %d survived SIGKILL; abandoning it", process.pid)


async def _terminate_group(process: Process, reaper: bool) -> None:
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
            await wait_exit(process)
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
