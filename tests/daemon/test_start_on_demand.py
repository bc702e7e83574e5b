"""``settings.daemon: on`` (``--daemon``): a command starts the daemon when none runs; two at once get one daemon."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon, cli, daemon_processes
from tests.daemon.test_daemon_lifecycle import _counter, _write_config

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(600)]

WAIT_S = 180.0


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
