"""``settings.daemon: on`` (``--daemon``): a command starts the daemon when none runs; two at once get one daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon, cli, daemon_processes
from tests.daemon.test_daemon_lifecycle import _counter, _write_config

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(600)]

WAIT_S = 180.0


@pytest.mark.slow
def test_a_command_starts_the_daemon_on_demand_and_the_next_one_finds_it_warm(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    assert daemon.status() is None
    code, out, err = cli("--daemon", "call", "counter:bump")
    assert code == 0, err
    assert out.startswith("1 pid ")
    status = daemon.status()
    assert status is not None, "no daemon was started"
    assert [s["server"] for s in status["servers"]] == ["counter"]  # type: ignore[attr-defined]
    code, out_again, err = cli("call", "counter:bump")  # auto: the running daemon
    assert code == 0, err
    assert out_again == out.replace("1 pid", "2 pid")  # the same warm process
    assert len(daemon_processes(daemon.runtime)) == 1


@pytest.mark.slow
def test_two_commands_starting_it_at_once_get_one_daemon(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    argv = [sys.executable, "-m", "mcpmux", "--daemon", "call", "counter:bump"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    commands = [subprocess.Popen(argv, env=daemon.env, cwd=tmp_path, **pipes) for _ in range(2)]
    outputs = []
    for command in commands:
        out, err = command.communicate(timeout=WAIT_S)
        assert command.returncode == 0, err
        outputs.append(out.split())
    counts, pids = sorted(o[0] for o in outputs), {o[-1] for o in outputs}
    assert (counts, len(pids)) == (["1", "2"], 1), outputs  # one instance in one daemon served both
    daemon.wait_for(lambda: len(daemon_processes(daemon.runtime)) == 1, "the losing daemon to exit")
    assert daemon.status() is not None


def test_a_socket_that_is_not_this_users_alone_is_never_replaced(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    daemon.socket.write_bytes(b"")
    daemon.socket.chmod(0o666)  # world-writable: refused, and no daemon is started over it
    code, out, err = cli("--daemon", "call", "counter:bump")
    assert (code, out) == (3, ""), err
    assert "its mode 666 lets other users in" in err
    assert daemon_processes(daemon.runtime) == []
    assert daemon.socket.read_bytes() == b""


@pytest.mark.slow
def test_auto_starts_the_daemon_for_a_connect_session_not_for_a_one_shot_command(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    env = {**daemon.env, "MCPMUX_DAEMON": "auto"}
    code, out, err = cli("call", "counter:bump")  # auto, none running: served here, nothing left behind
    assert (code, out.split()[0]) == (0, "1"), err
    assert daemon_processes(daemon.runtime) == []
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "counter__bump", "arguments": {}}},
    ]
    session = subprocess.Popen(
        [sys.executable, "-m", "mcpmux", "connect", "--all"], env=env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert session.stdin is not None and session.stdout is not None
    try:
        session.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        session.stdin.flush()
        reply: dict[str, object] = {}
        while reply.get("id") != 2:
            line = session.stdout.readline()
            assert line, "the session ended before it answered"
            reply = json.loads(line)
        started = daemon.status()  # the session started the daemon, which serves it
        _, err_bytes = session.communicate(timeout=WAIT_S)  # the host closes stdin: the session ends
    finally:
        if session.poll() is None:
            session.kill()
            session.wait(WAIT_S)
        for pipe in (session.stdout, session.stderr):
            if pipe is not None:
                pipe.close()
    assert session.returncode == 0, err_bytes.decode()[-2000:]
    assert "1 pid " in json.dumps(reply), reply
    assert started is not None and [s["server"] for s in started["servers"]] == ["counter"]  # type: ignore[attr-defined]
    assert len(daemon_processes(daemon.runtime)) == 1  # stopped and reaped by the fixture at the end
    code, out, err = cli("call", "counter:bump")  # auto now finds it running: its warm instance
    assert code == 0, err
    # A fresh instance: the session can answer sampling, a one-shot command cannot (part of the fingerprint).
    assert out.split()[0] == "1"


def test_a_test_environment_never_reaches_the_shared_runtime_directory() -> None:
    from tests.gateway.serving import isolated_env

    root = Path(os.environ["HOME"]) / "isolated"
    root.mkdir()
    env = isolated_env(root)
    assert env["MCPMUX_DAEMON"] == "off"
    runtime = Path(env["XDG_RUNTIME_DIR"])
    assert runtime.is_relative_to(root) and runtime.stat().st_mode & 0o077 == 0
    assert Path(os.environ["XDG_RUNTIME_DIR"]).is_relative_to(Path(os.environ["HOME"]))  # the autouse fixture's


def test_another_home_of_the_same_user_gets_a_daemon_of_its_own(daemon: Daemon, tmp_path: Path) -> None:
    """Issue 42 bug 2: with one runtime directory, another HOME's CLI used the first daemon, which ran that
    project's servers under the first HOME and data dir."""
    daemon.start("--linger", "600")
    first = daemon.socket
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    other = {**daemon.env, "HOME": str(other_home)}
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "MCPMUX_DATA_DIR", "MCPMUX_STATE_DIR"):
        other.pop(key, None)
    second = Daemon(daemon.runtime, other).socket
    assert first.exists() and second.parent == first.parent and second != first
    done = subprocess.run(
        [sys.executable, "-m", "mcpmux", "--json", "daemon", "status"], env=other, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr  # not the first home's daemon: none for this home
    assert json.loads(done.stdout)["running"] is False
    assert not second.exists()  # asking started nothing
    assert daemon.status() is not None  # the first home's daemon still serves its own
