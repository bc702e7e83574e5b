"""Child-process checks shared by the terminal tests: is a tool's shell command still running?"""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil

POLL_INTERVAL_S = 0.05


def sleepers(pid: int) -> list[str]:
    """Descendants of ``pid`` running ``sleep`` (zombies excluded)."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and "sleep" in " ".join(process.cmdline()):
                found.append(process.name())
        except psutil.NoSuchProcess:
            continue
    return found


def running(command: str) -> list[int]:
    """PIDs of every process whose command line contains ``command``."""
    return [p.pid for p in psutil.process_iter(["cmdline"]) if command in " ".join(p.info["cmdline"] or [])]


def wait_for(condition: Callable[[], object], timeout_s: float = 10.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes; return whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(POLL_INTERVAL_S)
    return False
