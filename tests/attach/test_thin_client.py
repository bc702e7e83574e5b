"""``mcpmux call``/``read`` of a warm server through the daemon take the thin path (no SDK, no manager).

The thin client (:mod:`mcpmux.attach.thin`) is checked from outside: a real ``python -m mcpmux``
process whose loaded modules are listed, its output against ``--no-daemon``, an approval the
daemon's guard asks, progress, the daemon's timeout, and the daemon killed while a call is in
flight (exit 3, the call never made twice).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.daemon.conftest import REPO, Daemon, cli
from tests.daemon.test_daemon_lifecycle import _counter, _write_config
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(600)]

HEAVY = ("mcp.client.session", "mcp.shared.session", "mcpmux.manager", "mcpmux.host", "mcpmux.policy.guard")
PROBE = """
import sys
from mcpmux.cli.main import run
code = run(sys.argv[1:])
heavy = [m for m in {heavy!r} if m in sys.modules]
sys.stderr.write("LOADED " + ",".join(heavy) + "\\n")
sys.exit(code)
"""
WAIT_S = 120.0


def _probe(daemon: Daemon, cwd: Path, *args: str) -> tuple[int, str, list[str]]:
    """``mcpmux ARGS`` in a fresh process; its exit code, stdout, and which heavy modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], env=daemon.env, cwd=cwd,
        capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    loaded = next(line for line in done.stderr.splitlines() if line.startswith("LOADED "))
    return done.returncode, done.stdout, [m for m in loaded.removeprefix("LOADED ").split(",") if m]


@pytest.mark.slow
def test_a_warm_call_loads_neither_the_sdk_nor_the_manager_and_prints_the_same(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    command, args = stdio_command("everything")
    _write_config(tmp_path, {"name": "everything", "command": command, "args": args}, _counter("counter"))
    daemon.start("--linger", "600")
    code, out, _ = cli("--daemon", "call", "everything:echo", "message=warm up")  # starts it in the daemon
    assert code == 0, out
    for args in (
        ("call", "everything:echo", "message=thin"),
        ("--json", "call", "everything:get-sum", "a=2", "b=3"),
        ("read", "everything", "demo://resource/static/document/architecture.md"),
    ):
        code, out, loaded = _probe(daemon, tmp_path, "--daemon", *args)
        direct = cli("--no-daemon", *args)
        assert (code, out) == (direct[0], direct[1]), args
        assert loaded == [], f"{args} loaded {loaded}"
    # Refused before the server saw it: the ordinary path reports it exactly (and may load what it needs).
    code, out, _ = _probe(daemon, tmp_path, "--daemon", "call", "everything:nosuch")
    assert (code, out) == cli("--no-daemon", "call", "everything:nosuch")[:2]
    # The daemon's guard audited the thin calls, naming the client's process.
    rows = json.loads(cli("--json", "audit", "--server", "everything")[1])
    assert any(r["face"] == "daemon" and "pid" in (r.get("caller") or "") for r in rows), rows


@pytest.mark.slow
def test_yes_answers_the_daemons_approval_on_the_thin_path(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mcp = {"servers": [_counter("counter")], "security": {"require_approval": True},
           "settings": {"connect_timeout_ms": 120_000}}  # fmt: skip
    (tmp_path / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")
    daemon.start("--linger", "600")
    code, _, err = cli("--daemon", "call", "-y", "counter:bump")
    assert code == 0, err
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "--daemon", "call", "-y", "counter:bump"],
        env=daemon.env, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 pid "), done.stdout  # the same warm instance, one call
    assert "counter:bump approved by --yes" in done.stderr
    assert "LOADED \n" in done.stderr, done.stderr
    # No terminal and no --yes: refused, with the ordinary path's words and exit code.
    assert cli("--daemon", "call", "counter:bump")[:2] == cli("--no-daemon", "call", "counter:bump")[:2] == (1, "")


@pytest.mark.slow
def test_the_daemons_timeout_is_reported_with_its_exit_code(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter", timeout_ms=500))
    daemon.start("--linger", "600")
    marker = tmp_path / "arrived"
    code, out, err = cli("--daemon", "call", "counter:wait", f"marker={marker}", "seconds=30")
    assert code == 3, (out, err)
    assert "timed out" in err.lower(), err
    code_direct, _, err_direct = cli("--no-daemon", "call", "counter:wait", f"marker={marker}", "seconds=30")
    assert code_direct == 3, err_direct


@pytest.mark.slow
def test_a_daemon_killed_during_a_thin_call_is_exit_3_and_the_call_is_not_repeated(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    process = daemon.start("--linger", "600")
    assert cli("--daemon", "call", "counter:bump")[0] == 0
    marker = tmp_path / "arrived"
    call = subprocess.Popen(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), "--daemon", "call", "counter:wait",
         f"marker={marker}", "seconds=60"],
        env={**daemon.env, "MCPMUX_DAEMON": "auto"}, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_S
        while not marker.exists() and time.monotonic() < deadline and call.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the call never reached the server"
        marker.unlink()
        daemon.kill()
        out, err = call.communicate(timeout=WAIT_S)
    finally:
        if call.poll() is None:
            call.kill()
            call.communicate(timeout=30)
    assert call.returncode == 3, err
    assert "daemon" in err and "closed" in err, err
    assert not marker.exists(), "the call was made a second time (the ordinary path ran it again)"
    assert out == ""
    process.wait(30)


def test_thin_client_source_stays_light() -> None:
    """The modules of the thin path import nothing heavy at module level (a cheap guard for regressions)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, mcpmux.cli.thin, mcpmux.attach.thin; "
         f"print([m for m in {HEAVY!r} if m in sys.modules])"],
        capture_output=True, text=True, timeout=WAIT_S, cwd=REPO,
    )  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def _everything(directory: Path, **extra: object) -> None:
    command, args = stdio_command("everything")
    prefix = extra.get("prefix", "everything")
    server = {"name": "everything", "command": command, "args": args, **extra}
    security = {"denied_tools": [f"{prefix}:get-env"], "pinning": "off"}
    mcp = {"servers": [server], "security": security, "settings": {"connect_timeout_ms": 120_000}}
    (directory / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")


@pytest.mark.slow
def test_tools_of_a_warm_server_take_the_thin_path_and_print_the_same(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _everything(tmp_path)
    daemon.start("--linger", "600")
    assert cli("--daemon", "call", "everything:echo", "message=warm up")[0] == 0  # starts it in the daemon
    for args in (
        ("tools", "everything"),
        ("--json", "tools", "everything"),
        ("tools", "everything:get-sum"),
        ("--json", "tools", "everything:echo"),
        ("tools", "everything:read_resource"),  # made by mcpmux: its description lists the server's resources
        ("--json", "tools", "everything:get_prompt"),
    ):
        code, out, loaded = _probe(daemon, tmp_path, "--daemon", *args)
        direct = cli("--no-daemon", *args)
        assert (code, out) == (direct[0], direct[1]), args
        assert loaded == [], f"{args} loaded {loaded}"
    listed = {t["name"] for t in json.loads(cli("--daemon", "--json", "tools", "everything")[1])}
    assert "everything:get-env" not in listed and "everything:echo" in listed  # the daemon's guard denied it
    # A tool that is not listed (or denied): the ordinary path names the closest ones, exactly.
    for args in (("tools", "everything:nosuch"), ("tools", "everything:get-env")):
        assert _probe(daemon, tmp_path, "--daemon", *args)[:2] == cli("--no-daemon", *args)[:2]


@pytest.mark.slow
def test_a_rule_written_with_a_servers_own_prefix_holds_on_the_thin_path(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's instance knows the server by name: a prefixed server's command keeps its own guard.

    Before, ``call ev:get-env`` (denied as ``ev:get-env``) ran through the daemon and printed the
    server's environment.
    """
    monkeypatch.chdir(tmp_path)
    _everything(tmp_path, prefix="ev")
    daemon.start("--linger", "600")
    assert cli("--daemon", "call", "ev:echo", "message=warm up")[0] == 0
    denied = cli("--no-daemon", "call", "ev:get-env")
    assert denied[0] != 0 and denied[1] == ""
    assert _probe(daemon, tmp_path, "--daemon", "call", "ev:get-env")[:2] == denied[:2]
    assert (
        _probe(daemon, tmp_path, "--daemon", "tools", "everything")[:2] == cli("--no-daemon", "tools", "everything")[:2]
    )
