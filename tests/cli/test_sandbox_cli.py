"""``mcpmux test`` and ``doctor`` run servers the way the manager does: inside the global sandbox,
with the backend that really works here (bubblewrap, else Landlock when bwrap is blocked)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpmux.cli.doctor import run_doctor
from mcpmux.processes import sandbox as sandbox_module
from tests.forkserver import MCPMUX

pytestmark = pytest.mark.subprocess

UBUNTU_ERROR = "bwrap: setting up uid map: Permission denied"

# Writes a marker beside itself (denied inside any sandbox: its folder is bound read-only), then serves.
PROBE_SERVER = """
import pathlib, sys
try:
    (pathlib.Path(__file__).parent / "escaped.txt").write_text("unsandboxed")
except OSError:
    pass
from mcp.server.mcpserver import MCPServer
server = MCPServer("probe")

@server.tool()
def ping() -> str:
    return "pong"

server.run()
"""


@pytest.fixture(autouse=True)
def fresh_backend() -> Iterator[None]:
    """The backend probe is cached per process: probe again in each test, and after it."""
    sandbox_module._detect.cache_clear()
    yield
    sandbox_module._detect.cache_clear()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config with the global sandbox on and one stdio server that tries to write outside it."""
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    (server_dir / "probe.py").write_text(PROBE_SERVER, encoding="utf-8")
    config = {
        "mcp": {
            "servers": [{"name": "probe", "command": sys.executable, "args": [str(server_dir / "probe.py")]}],
            "security": {"sandbox": {"enabled": True}},
        }
    }
    (tmp_path / "mcpmux.yaml").write_text(json.dumps(config), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _fake_bwrap(folder: Path) -> Path:
    """A ``bwrap`` that fails the way Ubuntu 23.10+'s AppArmor makes the real one fail."""
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{UBUNTU_ERROR}' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    return fake


def test_mcpmux_test_runs_the_server_inside_the_global_sandbox(project: Path) -> None:
    done = subprocess.run(
        [MCPMUX, "--config", str(project / "mcpmux.yaml"), "test", "probe", "--json"],
        capture_output=True, text=True, env=os.environ, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["tools"] == 1
    assert not (project / "server" / "escaped.txt").exists(), "mcpmux test ran the server unsandboxed"


def test_doctor_runs_servers_inside_the_global_sandbox(project: Path) -> None:
    report = run_doctor(str(project / "mcpmux.yaml"))
    (row,) = report["servers"]
    assert row["status"] == "ok", report["findings"]
    assert not (project / "server" / "escaped.txt").exists(), "doctor ran the server unsandboxed"


def test_a_blocked_bwrap_is_detected_and_servers_fall_back_to_landlock(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_bwrap(project / "fakebin")
    monkeypatch.setenv("PATH", f"{project / 'fakebin'}{os.pathsep}{os.environ['PATH']}")
    report = run_doctor(str(project / "mcpmux.yaml"))
    assert report["sandbox"]["backend"] == "landlock"
    assert report["sandbox"]["available"] is True
    assert UBUNTU_ERROR in report["sandbox"]["detail"]
    (finding,) = [f for f in report["findings"] if f["check"] == "sandbox"]
    assert finding["severity"] == "warning"
    assert "bubblewrap unavailable" in finding["message"]
    assert "user namespaces" in finding["hint"]
    (row,) = report["servers"]
    assert row["status"] == "ok", report["findings"]
    assert not (project / "server" / "escaped.txt").exists(), "the Landlock fallback did not confine the server"
