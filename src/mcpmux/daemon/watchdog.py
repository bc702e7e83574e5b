"""The children die with the daemon, even when it is killed: a watchdog process outside its reach.

A stdio child leads its own process group (the transport starts it in a new session, so it is
stopped with everything it spawned). When the daemon stops normally its hosts stop them. When the
daemon is killed (SIGKILL, OOM), nothing in it runs: a small watchdog, started first, reads the set
of live process groups from a pipe; the pipe's end is the daemon's death, and the watchdog then
terminates every group it was told of (SIGTERM, then SIGKILL after a grace).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

import anyio
from anyio.abc import Process

__all__ = ["GRACE_S", "Watchdog"]

GRACE_S = 3.0

# Runs in ``python -I -S``: the standard library only, a few MB of memory.
_WATCH = r"""
import os, signal, sys, time
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
groups = set()
for line in sys.stdin:
    groups = {int(g) for g in line.split()}
def send(sig, targets):
    alive = set()
    for g in targets:
        try:
            os.killpg(g, sig)
            alive.add(g)
        except (ProcessLookupError, PermissionError):
            pass
    return alive
alive = send(signal.SIGTERM, groups)
deadline = time.monotonic() + float(sys.argv[1])
while alive and time.monotonic() < deadline:
    time.sleep(0.05)
    alive = send(0, alive)
send(signal.SIGKILL, alive)
"""


class Watchdog:
    """The watchdog process of one daemon; :meth:`track` tells it the live groups."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._sent: frozenset[int] = frozenset()

    @classmethod
    async def start(cls) -> Watchdog:
        """Start the watchdog (before any child exists)."""
        command = [sys.executable, "-I", "-S", "-c", _WATCH, str(GRACE_S)]
        process = await anyio.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=None, start_new_session=True
        )
        return cls(process)

    @property
    def pid(self) -> int:
        return self._process.pid

    async def track(self, groups: Iterable[int]) -> None:
        """Tell the watchdog which process groups to end if the daemon dies (only when they changed)."""
        current = frozenset(groups)
        if current != self._sent and self._process.stdin is not None:
            await self._process.stdin.send((" ".join(map(str, sorted(current))) + "\n").encode())
            self._sent = current

    async def close(self) -> None:
        """The daemon stopped its children itself: release the watchdog with nothing to end, and reap it."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE_S + 2):
            await self.track(())
            if self._process.stdin is not None:
                await self._process.stdin.aclose()
            await self._process.wait()
