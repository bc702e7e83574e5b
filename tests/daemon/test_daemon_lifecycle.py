"""The daemon as a user meets it: one per user, stops its servers when idle, follows the config, dies cleanly."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import psutil
import pytest

from tests.daemon.conftest import REPO, Daemon, cli
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]


def _counter(name: str, **extra: object) -> dict[str, object]:
    command = [sys.executable, "-m", "mcpmux.testing", "--module", "tests.daemon.counter:counter"]
    return {"name": name, "command": command[0], "args": command[1:], "cwd": str(REPO), **extra}


def _write_config(directory: Path, *servers: dict[str, object], settings: dict[str, object] | None = None) -> None:
    # A loaded 2-core machine can take longer than the default to start a Python child.
    mcp: dict[str, object] = {"servers": list(servers), "settings": {"connect_timeout_ms": 120_000, **(settings or {})}}
    (directory / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")


def _bump(server: str, *flags: str) -> tuple[int, int]:
    """(count, server pid) of one ``bump`` call."""
    code, out, err = cli(*flags, "--json", "call", f"{server}:bump")
    assert code == 0, err
    text = json.loads(out)["content"][0]["text"]
    count, _, pid = text.partition(" pid ")
    return int(count), int(pid)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.slow
def test_two_daemons_racing_to_start_one_serves_and_the_other_exits_0_naming_it(daemon: Daemon) -> None:
    first, second = daemon.spawn("--linger", "600"), daemon.spawn("--linger", "600")
    daemon.wait_for(lambda: first.poll() is not None or second.poll() is not None, "one daemon to give way")
    loser, winner = (first, second) if first.poll() is not None else (second, first)
    assert loser.wait(30) == 0
    assert winner.poll() is None
    status = daemon.status()
    assert status is not None
    serving = int(str(status["pid"]))  # the winner itself, or (Linux) its guardian's child
    assert winner.pid in (serving, psutil.Process(serving).ppid())
    assert f"already serves {daemon.socket} (pid {serving})" in daemon.log.read_text()


@pytest.mark.slow
def test_start_status_stop_and_the_socket_is_private(daemon: Daemon) -> None:
    code, out, _ = cli("daemon", "status")
    assert (code, "not running" in out) == (3, True)
    code, out, err = cli("daemon", "start", "--linger", "600")
    assert code == 0, err
    assert "mcpmux daemon running (pid" in out
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.socket.parent.stat().st_mode) == 0o700
    pid = daemon.status()["pid"]  # type: ignore[index]
    code, out, _ = cli("daemon", "start")
    assert code == 0 and f"pid {pid}" in out  # already running: the same daemon
    code, out, _ = cli("daemon", "stop")
    assert (code, out.strip()) == (0, f"mcpmux daemon stopped (pid {pid})")
    daemon.wait_for(lambda: _gone(int(str(pid))), "the daemon to exit")
    assert not daemon.socket.exists()
    assert cli("daemon", "status")[0] == 3
    assert cli("daemon", "stop")[1].startswith("mcpmux daemon: not running")


@pytest.mark.slow
def test_an_idle_server_is_stopped_and_the_next_call_starts_it_again(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter", idle_timeout_s=0.5))
    daemon.start("--linger", "600")
    _, pid = _bump("counter")
    daemon.wait_for(lambda: "counter" not in daemon.server_pids(), "the idle server to stop")
    daemon.wait_for(lambda: _gone(pid), "its process to be reaped")
    count, again = _bump("counter")
    assert (count, again != pid) == (1, True)


@pytest.mark.slow
def test_the_daemon_stops_itself_with_no_client_and_no_server(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter", idle_timeout_s=0.3))
    process = daemon.start("--linger", "5")  # long enough for the call below to arrive first
    _bump("counter")
    daemon.wait_for(lambda: process.poll() is not None, "the daemon to stop itself")
    assert process.returncode == 0 and not daemon.socket.exists()


@pytest.mark.slow
def test_a_changed_entry_gets_a_new_instance_and_the_others_keep_running(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("a", env={"V": "1"}), _counter("b"))
    daemon.start("--linger", "600")
    (_, a1), (_, b1) = _bump("a"), _bump("b")
    _write_config(project, _counter("a", env={"V": "2"}), _counter("b"))
    (count_a, a2), (count_b, b2) = _bump("a"), _bump("b")
    assert (count_a, a2 != a1) == (1, True)  # restarted: a fresh process, a fresh count
    assert (count_b, b2) == (2, b1)  # untouched: the same warm process
    daemon.wait_for(lambda: _gone(a1), "the old instance of 'a' to stop")
    status = daemon.status()
    assert status is not None
    assert sorted(s["server"] for s in status["servers"]) == ["a", "b"]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_per_client_server_never_sees_another_clients_state(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("shared"), _counter("mine", share="per-client"))
    daemon.start("--linger", "600")
    assert [_bump("shared")[0] for _ in range(3)] == [1, 2, 3]
    counts = [_bump("mine") for _ in range(3)]
    assert [c for c, _ in counts] == [1, 1, 1]
    assert len({pid for _, pid in counts}) == 3
    daemon.wait_for(lambda: all(_gone(pid) for _, pid in counts), "per-client instances to stop with their client")


@pytest.mark.slow
def test_a_per_call_server_is_started_by_the_command_itself(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("transient", share="per-call"))
    daemon.start("--linger", "600")
    counts = [_bump("transient") for _ in range(2)]
    assert [c for c, _ in counts] == [1, 1]
    assert daemon.server_pids() == {}


@pytest.mark.slow
def test_a_killed_daemon_takes_its_children_and_the_next_command_starts_a_new_one(
    daemon: Daemon, project: Path
) -> None:
    _write_config(project, _counter("counter"))
    process = daemon.start("--linger", "600")
    _, child = _bump("counter")
    watchdog = int(str(daemon.status()["watchdog_pid"]))  # type: ignore[index]
    killed = daemon.kill()
    process.wait(30)  # the guardian (on Linux) or the daemon itself
    daemon.wait_for(lambda: _gone(child), "the killed daemon's server to be ended by the watchdog")
    daemon.wait_for(lambda: _gone(watchdog), "the watchdog to exit")
    count, fresh = _bump("counter", "--daemon")  # on: a new daemon is started on demand
    assert (count, fresh != child) == (1, True)
    assert daemon.status()["pid"] != killed  # type: ignore[index]


def test_without_a_usable_daemon_auto_falls_back_and_forced_is_a_clear_error(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    args = ("call", "time:convert_time", "source_timezone=UTC", "time=12:00", "target_timezone=Asia/Tokyo")
    command, argv = stdio_command("time")
    _write_config(project, {"name": "time", "command": command, "args": argv})
    direct = cli("--no-daemon", *args)
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    os.chmod(daemon.runtime / "mcpmux", 0o777)  # not private: never used
    assert cli(*args)[:2] == direct[:2]
    code, out, err = cli("--daemon", *args)
    assert code == 3 and out == ""
    assert "Error: server 'time': cannot connect to the mcpmux daemon at" in err
    assert "its mode 777 lets other users in" in err
    assert not daemon.socket.exists()


@pytest.mark.slow
def test_the_audit_row_names_the_client_process(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    daemon.start("--linger", "600")
    _bump("counter")
    expected = ("daemon", f"mcpmux/0.1.0 (pid {os.getpid()})")
    # The daemon's audit writer stores rows behind the calls: wait for it (bounded).
    daemon.wait_for(lambda: expected in _audit_rows(), "the daemon's audit row")


def _audit_rows() -> set[tuple[str, str]]:
    code, out, _ = cli("--json", "audit", "--server", "counter")
    assert code == 0
    return {(row["face"], row["caller"]) for row in json.loads(out)}
