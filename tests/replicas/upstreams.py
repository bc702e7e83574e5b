"""Tiny upstreams for nginx tests: :func:`running_upstream` runs :mod:`tests.replicas.tiny_upstream` on a free port."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.peers.fixtures import free_port, stop_process_group

__all__ = ["Upstream", "running_upstream"]

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0


@dataclass
class Upstream:
    """A running tiny upstream: its name (its answer), port, process and executions log."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def executions(self) -> list[str]:
        """``METHOD PATH`` of every request it took, in order."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def kill(self) -> None:
        """SIGKILL, as a replica dies; reaped."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(START_TIMEOUT_S)


def _answers(port: int) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(f"http://127.0.0.1:{port}/ping", timeout=2.0).status_code == 200
    return False


@contextlib.contextmanager
def running_upstream(name: str, tmp_path: Path) -> Iterator[Upstream]:
    """Run upstream ``name`` (its log in ``tmp_path``) until it answers; stop and reap it after."""
    port, log = free_port(), tmp_path / f"{name}.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.replicas.tiny_upstream", name, str(log)],
        cwd=ROOT, env={**os.environ, "PORT": str(port)}, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(port):
            assert process.poll() is None, f"upstream {name} exited with {process.returncode}"
            assert time.monotonic() < deadline, f"upstream {name} did not answer on {port} in {START_TIMEOUT_S} s"
            time.sleep(0.05)
        log.write_text("")  # the readiness pings are not executions
        yield Upstream(name, port, process, log)
    finally:
        stop_process_group(process)
