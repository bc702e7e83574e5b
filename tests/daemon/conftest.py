"""A private daemon per test: its own short runtime directory, started as a real process, always reaped."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import psutil
import pytest

from mcpmux.attach.paths import home_key
from mcpmux.cli.main import run

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Daemon:
    """One ``mcpmux daemon run`` process of a test."""

    runtime: Path
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        """The daemon's socket for this test's home (as ``socket_path`` names it, without its checks)."""
        with mock.patch.dict(os.environ, self.env, clear=True):
            return self.runtime / "mcpmux" / f"daemon-{home_key()}.sock"

    @property
    def log(self) -> Path:
        return self.runtime / "daemon-test.log"

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        """``mcpmux daemon run ARGS`` in the background (stderr to the test's log)."""
        with self.log.open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "mcpmux", "daemon", "run", *args],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        return process

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """Spawn and wait until it answers."""
        process = self.spawn(*args)
        self.wait_serving(process)
        return process

    def wait_serving(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"daemon exited with {process.returncode}: {self.log.read_text()}")
            if self.status() is not None:
                return
            time.sleep(0.05)
        raise AssertionError(f"daemon did not answer within {START_TIMEOUT_S} s: {self.log.read_text()}")

    def status(self) -> dict[str, object] | None:
        import json

        code, out, _ = cli("--json", "daemon", "status")
        return json.loads(out) if code == 0 else None

    def kill(self) -> int:
        """SIGKILL the serving daemon itself (on Linux the child of the guardian a test started); its pid."""
        status = self.status()
        assert status is not None, "no daemon answers"
        pid = int(str(status["pid"]))
        os.kill(pid, signal.SIGKILL)
        return pid

    def server_pids(self) -> dict[str, int]:
        status = self.status() or {}
        servers = status.get("servers", [])
        assert isinstance(servers, list)
        return {s["server"]: s["pid"] for s in servers if s.get("pid")}

    def wait_for(self, predicate: object, what: str, timeout_s: float = START_TIMEOUT_S) -> None:
        assert callable(predicate)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; log: {self.log.read_text()[-2000:]}")

    def reap(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill_tree(process.pid)
                process.wait(STOP_TIMEOUT_S)


def daemon_processes(runtime: Path) -> list[psutil.Process]:
    """Every ``mcpmux daemon run`` of this user serving ``runtime`` (also those a command started on demand;
    on Linux each is the child of a guardian, not counted)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            cmdline = process.info["cmdline"] or []
            if not {"mcpmux", "daemon", "run"} <= set(cmdline) or any(p.endswith("_reaper.py") for p in cmdline):
                continue  # not a daemon (or its guardian)
            if process.environ().get("XDG_RUNTIME_DIR") == str(runtime):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _kill_tree(pid: int) -> None:
    try:
        parent = psutil.Process(pid)
        for child in parent.children(recursive=True):
            child.kill()
        parent.kill()
    except psutil.NoSuchProcess:
        pass


def cli(*args: str) -> tuple[int, str, str]:
    """The CLI in process through its error boundary: exit code, stdout, stderr."""
    from click.testing import CliRunner

    with CliRunner().isolation() as (out, err, _):
        code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.fixture(name="daemon")
def daemon_fixture(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Iterator[Daemon]:
    """A runtime directory short enough for a Unix socket path; the daemon mode ``auto``; every daemon reaped."""
    runtime = Path(tempfile.mkdtemp(prefix="mxd", dir="/tmp"))
    os.chmod(runtime, 0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("MCPMUX_DAEMON", "auto")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    handle = Daemon(runtime, env)
    try:
        yield handle
    finally:
        cli("daemon", "stop")
        handle.reap()
        for stray in daemon_processes(runtime):  # started on demand by a command (settings.daemon: auto)
            _kill_tree(stray.pid)
        shutil.rmtree(runtime, ignore_errors=True)
