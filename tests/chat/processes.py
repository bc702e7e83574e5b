"""Child-process checks shared by the terminal tests: is a tool's shell command still running?"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable

import psutil

POLL_INTERVAL_S = 0.05
WAIT_S = 30.0
"""Generous: a loaded 2-core machine takes well over 10 s to start mcpmux, a model stub and a shell."""


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


def sleeper_pids(pid: int) -> list[int]:
    """PIDs of the descendants of ``pid`` running ``sleep`` (zombies excluded)."""
    found = []
    for process in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE and "sleep" in " ".join(process.cmdline()):
                found.append(process.pid)
    return found


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie waiting for init to reap it is not)."""
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
    return left


def kill_and_reap(child: subprocess.Popen[str]) -> None:
    """SIGKILL ``child`` and every descendant, then reap it and close its pipes (no ResourceWarning later)."""
    if child.poll() is not None:
        return
    with contextlib.suppress(psutil.NoSuchProcess):
        for process in psutil.Process(child.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    child.kill()
    child.communicate()


def running(command: str) -> list[int]:
    """PIDs of every process whose command line contains ``command``."""
    return [p.pid for p in psutil.process_iter(["cmdline"]) if command in " ".join(p.info["cmdline"] or [])]


def wait_for(condition: Callable[[], object], timeout_s: float = WAIT_S) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes; return whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(POLL_INTERVAL_S)
    return False
