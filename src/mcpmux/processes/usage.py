"""What a stdio server costs the machine: resident memory and CPU time of its child and descendants.

::

    usage = process_usage(status.pid)   # None when there is no such process (or no pid)
    usage.rss_bytes, usage.cpu_seconds, usage.processes

Read with psutil at the moment of asking (a few system calls per process). Descendants that exit
or deny access while being read are left out of the sum, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["ProcessUsage", "process_usage", "server_pid"]

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """The summed usage of one process tree."""

    rss_bytes: int
    cpu_seconds: float
    processes: int

    def to_json(self) -> dict[str, Any]:
        """``{"rss_mb", "cpu_seconds", "processes"}`` (rounded for people; bytes stay exact in /metrics)."""
        return {
            "rss_mb": round(self.rss_bytes / MB, 1),
            "cpu_seconds": round(self.cpu_seconds, 2),
            "processes": self.processes,
        }


def process_usage(pid: int | None) -> ProcessUsage | None:
    """RSS and CPU time (user + system) of ``pid`` and every descendant; ``None`` if it is gone."""
    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    rss, cpu, counted = 0, 0.0, 0
    for process in tree:
        try:
            with process.oneshot():
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # exited (or hidden) between the listing and the read
        counted += 1
    return ProcessUsage(rss, cpu, counted) if counted else None


def server_pid(pid: int | None) -> int | None:
    """The pid to show for a server whose child is ``pid``: the command's own when ``pid`` is the reaper that
    runs it (``processes/_reaper.py`` forks the command at once), else ``pid``. Linux ``/proc`` only, as the
    reaper; the tree under ``pid`` is still what :func:`process_usage` and memory limits measure."""
    if pid is None:
        return None
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        own = argv[: argv.index(b"--")] if b"--" in argv else argv  # the reaper's words, not its command's
        if not any(part.endswith(b"/_reaper.py") for part in own):
            return pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:  # gone, or not Linux
        return pid
    return int(children[0]) if children else pid
