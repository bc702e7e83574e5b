"""The reaper: ``python -I -S _reaper.py -- CMD ARGS...`` runs a command so that no descendant survives it.

A process group is not enough: a child that calls ``setsid()`` (``setsid sleep 1000 &``) or
double-forks a daemon leaves the group, and ``killpg`` misses it. The reaper is a Linux *child
subreaper* (``PR_SET_CHILD_SUBREAPER``): every orphan among the command's descendants is
reparented to it instead of to init, so it can always find them (``/proc/*/stat`` parent links).

- It forks the command and waits. When the command exits, it SIGKILLs every remaining descendant,
  reaps them and exits with the command's status (a signal death is re-raised on itself).
- ``SIGUSR1`` (sent by the host before it gives up on the group, and set as the reaper's
  ``PR_SET_PDEATHSIG``, so it also arrives when the host is SIGKILLed) kills every descendant,
  the command included, at once.
- ``SIGTERM``/``SIGINT``/``SIGHUP`` reach the command: through the process group when the host
  signals the group; the reaper forwards them to the command's own group when it left ours.

Run as a file with ``-I -S`` (stdlib only, fast start). Used by the stdio transport and by the
workspace's commands; it lives in the built-in servers' package, the lower of the two layers.
Elsewhere than Linux it is not used (:data:`AVAILABLE`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

TYPE_CHECKING = False  # typing itself costs a few ms of start-up: mypy honours a local flag too
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

__all__ = ["AVAILABLE", "KILL_SIGNAL", "main", "reaper_argv"]

AVAILABLE = sys.platform == "linux" and os.path.isdir("/proc")
KILL_SIGNAL = signal.SIGUSR1
"""Sent to the reaper: kill every descendant now and exit."""
_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_SWEEP_PAUSE_S = 0.005
_MAX_SWEEPS = 2000
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _KillNow(Exception):
    """Raised from the SIGUSR1 handler to leave the wait."""


def reaper_argv(argv: list[str]) -> list[str]:
    """``argv`` run under the reaper (unchanged where it is not available)."""
    if not AVAILABLE:
        return list(argv)
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--", *argv]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _reap(statuses: dict[int, int]) -> bool:
    """Reap every exited child; False once we have no children left."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        statuses[pid] = status


def _kill_all(statuses: dict[int, int]) -> None:
    """SIGKILL every descendant until none is left (killed ones' children come to us: we reap)."""
    me = os.getpid()
    for _ in range(_MAX_SWEEPS):
        alive = _descendants(me)
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue  # gone meanwhile, or not ours to kill
        has_children = _reap(statuses)
        if not alive and not has_children:
            return
        time.sleep(_SWEEP_PAUSE_S)


def _kill_now(_signum: int, _frame: FrameType | None) -> None:
    raise _KillNow


def _forwarder(child: int) -> Callable[[int, FrameType | None], None]:
    def forward(signum: int, _frame: FrameType | None) -> None:
        try:
            group = os.getpgid(child)
            if group != os.getpgrp():
                os.killpg(group, signum)
        except OSError:
            return  # the command is gone: nothing to forward to

    return forward


def _exec(command: list[str]) -> None:
    for signum in (*_FORWARDED, signal.SIGUSR1, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"mcpmux reaper: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
    os._exit(127)


def main(argv: list[str]) -> int:
    """Run the command after ``--``; return its exit code (re-raise the signal that killed it)."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise SystemExit("_reaper: usage: _reaper.py -- COMMAND [ARGS...]")
    command = argv[argv.index("--") + 1 :]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    host = os.getppid()
    signal.signal(KILL_SIGNAL, _kill_now)
    libc.prctl(_PR_SET_PDEATHSIG, KILL_SIGNAL, 0, 0, 0)
    statuses: dict[int, int] = {}
    child = -1
    try:
        if os.getppid() != host:
            return 137  # the host died before we could watch it: start nothing
        child = os.fork()
        if child == 0:
            _exec(command)
        for signum in _FORWARDED:
            signal.signal(signum, _forwarder(child))
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # only the command holds the host's pipes: their EOF means it is gone
        while child not in statuses:
            pid, status = os.waitpid(-1, 0)
            statuses[pid] = status
    except _KillNow:
        pass
    except ChildProcessError:
        statuses.setdefault(child, 0)
    signal.signal(KILL_SIGNAL, signal.SIG_IGN)
    _kill_all(statuses)
    status = statuses.get(child, 9)  # killed by us before it exited: report SIGKILL
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
