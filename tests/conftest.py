"""Test-wide fixtures: the anyio backend, isolated user dirs, and the real peers' fixtures."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver

pytest_plugins = ["tests.peers.fixtures", "tests.field.report"]


def pytest_configure(config: pytest.Config) -> None:
    """Children start with Ctrl-C working however the suite was started: a shell starts a background job
    with SIGINT ignored, children inherit an ignored signal across exec (a handler is reset), and the
    tests that interrupt a real ``mcpmux`` would then wait for an exit that never comes."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The process that runs tests (a worker, or pytest itself with -n 0) gets a fork server for its
    # `mcpmux` children (tests/forkserver.py); xdist's controller runs none.
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        forkserver.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    forkserver.uninstall()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker, the ungrouped tests marked ``slow`` come first: the controller hands
    tests out in the order the workers collected them (groups, largest first, before single tests), so
    the longest start early instead of last, on one worker, while the others wait. A group keeps its
    tests in file order: some share a module's server and build on what an earlier test did."""
    if hasattr(config, "workerinput"):
        items.sort(
            key=lambda item: not (item.get_closest_marker("slow") and not item.get_closest_marker("xdist_group"))
        )


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every test gets its own HOME, XDG dirs (its runtime directory too) and mcpmux state/data dirs:
    no test reads the user's, or meets another test's daemon."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".state"), ("XDG_DATA_HOME", ".data")):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("MCPMUX_STATE_DIR", str(home / "mcpmux-state"))
    monkeypatch.setenv("MCPMUX_DATA_DIR", str(home / "mcpmux-data"))
    monkeypatch.delenv("MCPMUX_CONFIG", raising=False)
    # Tests write project files (./mcpmux.yaml) and run commands beside them, as a CI job of one's own
    # repository does: trusted through the switch made for that (mcpmux.config.trust). The trust tests
    # (tests/config/test_trust.py, tests/attacks/test_trust_attacks.py) take it away.
    monkeypatch.setenv("MCPMUX_TRUST_PROJECT_FILES", "1")
    # No test meets a user's `mcpmux daemon` or starts one by accident (tests/daemon turn it on); a
    # daemon a test's command started anyway lives in the test's own runtime directory and is stopped.
    monkeypatch.setenv("MCPMUX_DAEMON", "off")
    monkeypatch.delenv("MCPMUX_DAEMON_SOCKET", raising=False)
    runtime = home / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    yield home
    stop_stray_daemon(runtime)


def stop_stray_daemon(runtime: Path, timeout_s: float = 30.0) -> None:
    """Stop (and wait out) the daemon serving ``runtime``, if one does: SIGTERM, then SIGKILL."""
    lock = runtime / "mcpmux" / "daemon.lock"
    if not lock.exists():
        return
    pid = _lock_holder(lock)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _lock_holder(lock) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if _lock_holder(lock) is not None:
        os.kill(pid, signal.SIGKILL)


def _lock_holder(lock: Path) -> int | None:
    """The pid a running daemon wrote into its lock file, or ``None`` when no process holds the lock."""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.read(fd, 32).decode(errors="replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)
    return None
