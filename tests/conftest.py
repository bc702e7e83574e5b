"""Test-wide fixtures: the anyio backend, isolated user dirs, and the real peers' fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.peers.fixtures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME, XDG dirs and mcpmux state/data dirs: no test reads the user's."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_STATE_HOME", ".state"), ("XDG_DATA_HOME", ".data")):
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.setenv("MCPMUX_STATE_DIR", str(home / "mcpmux-state"))
    monkeypatch.setenv("MCPMUX_DATA_DIR", str(home / "mcpmux-data"))
    monkeypatch.delenv("MCPMUX_CONFIG", raising=False)
    # No test meets a user's `mcpmux daemon` or starts one by accident (tests/daemon turn it on).
    monkeypatch.setenv("MCPMUX_DAEMON", "off")
    monkeypatch.delenv("MCPMUX_DAEMON_SOCKET", raising=False)
    return home
