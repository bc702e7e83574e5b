"""``mcpmux doctor``: every server and the environment checked, with hints; exit 0 only when all is well."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mcpmux.cli import doctor_checks
from mcpmux.cli.doctor import run_doctor
from mcpmux.config import Config, Settings
from mcpmux.config.models import StdioServerConfig
from tests.forkserver import MCPMUX
from tests.peers.fixtures import stdio_command

FINDING_KEYS = {"severity", "check", "server", "message", "hint"}


def _write(project: Path, *entries: str, settings: str = "") -> None:
    (project / "mcpmux.yaml").write_text(
        "mcp:\n" + (f"  settings: {settings}\n" if settings else "") + "  servers:\n" + "".join(entries),
        encoding="utf-8",
    )


def _peer(name: str, peer: str, extra: str = "") -> str:
    command, args = stdio_command(peer)
    return f"    - {{name: {name}, command: {json.dumps(command)}, args: {json.dumps(args)}{extra}}}\n"


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [MCPMUX, "doctor", "--json", *args], capture_output=True, text=True, env=os.environ, timeout=60, check=False
    )
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.subprocess
def test_a_healthy_setup_exits_0_with_the_documented_schema(project: Path) -> None:
    _write(project, _peer("time", "time"), "    - {name: off, command: nowhere-to-be-found, enabled: false}\n")
    code, report = doctor()
    assert code == 0, report["findings"]
    assert set(report) == {"ok", "environment", "sandbox", "config_files", "servers", "findings"}
    assert report["ok"] is True
    time_row, off_row = report["servers"]
    assert time_row["status"] == "ok" and time_row["tools"] == 2 and time_row["connect_ms"] > 0
    assert 0 < time_row["estimated_tokens"] < 10_000
    assert off_row["status"] == "skipped"
    assert set(report["environment"]["runtimes"]) == {"npx", "uvx", "node", "python3", "python", "docker"}
    assert set(report["sandbox"]) == {"backend", "path", "available", "detail"}
    assert all(set(f) == FINDING_KEYS for f in report["findings"])
    assert [f["path"] for f in report["config_files"] if f["exists"]] == [str(project / "mcpmux.yaml")]


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_missing_command_fails_with_where_the_runtimes_are(project: Path) -> None:
    _write(project, "    - {name: ghost, command: ghost-mcp-server-not-installed}\n")
    for args in ((), ("--no-connect",)):
        code, report = doctor(*args)
        assert code == 1 and report["ok"] is False
        (problem,) = [f for f in report["findings"] if f["check"] == "command"]
        assert problem["server"] == "ghost" and "not found" in problem["message"]
        assert "npx" in problem["hint"] and "python" in problem["hint"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_config_problems_are_listed_per_file(project: Path) -> None:
    _write(project, "    - {name: bad, type: stdio, comand: x}\n")
    code, report = doctor()
    assert code == 1 and report["servers"] == []
    problems = report["config_files"][1]["problems"]
    assert any("did you mean 'command'" in p for p in problems)
    assert any(f["check"] == "config" and f["severity"] == "error" for f in report["findings"])


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_crashing_server_is_a_connect_failure(project: Path) -> None:
    _write(project, "    - {name: crash, command: sh, args: ['-c', 'echo boom >&2; exit 3']}\n")
    code, report = doctor()
    assert code == 1
    (problem,) = [f for f in report["findings"] if f["server"] == "crash"]
    assert problem["check"] == "connect" and "boom" in problem["message"]


def test_names_are_judged_for_every_provider_profile() -> None:
    config = Config(
        servers=(
            StdioServerConfig(name="a", command="x"),
            StdioServerConfig(name="b", command="x", prefix="a"),
            StdioServerConfig(name="c", command="x"),
        ),
        settings=Settings(),
    )
    rows = [
        {"name": "a", "tool_names": ["read file", "x" * 70]},
        {"name": "b", "tool_names": ["read file"]},
        {"name": "c", "tool_names": ["b__c"]},
    ]
    findings = doctor_checks.check_names(config, rows)
    collisions = [f for f in findings if f["check"] == "collision"]
    assert any("offered by 'a' and 'b'" in f["message"] for f in collisions)
    renamed = [f for f in findings if f["check"] == "names"]
    assert any(
        f["message"] == "'a:read file' is not a valid openai name; it is sent as 'a__read_file'" for f in renamed
    )
    assert any("openai" in f["message"] and f["severity"] == "info" for f in renamed)


def test_collisions_between_provider_names_are_errors() -> None:
    config = Config(servers=(StdioServerConfig(name="a", command="x"), StdioServerConfig(name="a__b", command="x")))
    rows = [{"name": "a", "tool_names": ["b__c"]}, {"name": "a__b", "tool_names": ["c"]}]
    collisions = [f for f in doctor_checks.check_names(config, rows) if f["check"] == "collision"]
    assert collisions and all(f["severity"] == "error" for f in collisions)


def test_a_wanted_sandbox_that_cannot_run_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_SANDBOX_BACKEND", "no-such-backend")  # neither backend is tried: none works
    wanted = Config.model_validate({"security": {"sandbox": {"enabled": True}}})
    report, (found,) = doctor_checks.check_sandbox(wanted)
    assert report["available"] is False and found["severity"] == "error" and "bubblewrap" in found["hint"]
    _, (quiet,) = doctor_checks.check_sandbox(Config())
    assert quiet["severity"] == "info"


def test_run_doctor_without_connecting_uses_the_catalog(project: Path) -> None:
    _write(project, "    - {name: lazy, command: sh}\n")
    report = run_doctor(None, connect=False)
    assert report["servers"][0]["status"] == "skipped" and report["servers"][0]["tools"] is None


class _Unauthorized(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.network
def test_http_401_is_an_auth_finding_with_a_header_hint(project: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        _write(project, f"    - {{name: locked, type: http, url: '{url}', retry_attempts: 0}}\n")
        report = run_doctor(None)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    (problem,) = [f for f in report["findings"] if f["server"] == "locked"]
    assert problem["check"] == "auth" and "Authorization" in problem["hint"]
    assert report["ok"] is False


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_cold_npx_start_slower_than_the_connect_timeout_gets_the_cache_hint(project: Path) -> None:
    npx = project / "npx"
    npx.write_text("#!/bin/sh\nexec sleep 5\n", encoding="utf-8")
    npx.chmod(0o755)
    _write(project, f"    - {{name: slow, command: '{npx}', args: ['-y', 'pkg'], connect_timeout_ms: 300}}\n")
    report = run_doctor(None)
    (problem,) = [f for f in report["findings"] if f["server"] == "slow"]
    assert problem["check"] == "timeout" and "timed out" in problem["message"]
    assert "cold npx start" in problem["hint"] and "connect_timeout_ms" in problem["hint"]
