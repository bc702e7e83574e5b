"""The daemon's guardian (Linux): one reaper for the daemon and all its servers, instead of one per server.

Real processes checked by PID: the tree a user's ``ps`` shows, a server's stray (a double-forked
``setsid`` daemon) ended once nothing runs and when the daemon is SIGKILLed, and a killed guardian
taking the daemon and its servers with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from mcpmux.processes._reaper import AVAILABLE
from tests.attacks.test_process_attacks import DAEMONIZING_SERVER
from tests.daemon.conftest import Daemon, cli
from tests.daemon.test_daemon_lifecycle import _bump, _counter, _gone, _write_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.subprocess,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not AVAILABLE, reason="the guardian is a Linux child subreaper"),
]

WAIT_S = 120.0

# A stdio server that double-forks `sleep` into a session of its own (out of its process group),
# writes that stray's pid, then serves MCP: the process attacks' server.
STRAY_SERVER = DAEMONIZING_SERVER


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stray_server(project: Path, **extra: object) -> tuple[dict[str, object], Path]:
    script, pidfile = project / "strays.py", project / "stray.pid"
    script.write_text(STRAY_SERVER, encoding="utf-8")
    return {"name": "strays", "command": sys.executable, "args": [str(script), str(pidfile)], **extra}, pidfile


def _stray_pid(pidfile: Path, daemon: Daemon) -> int:
    daemon.wait_for(pidfile.exists, "the server's stray to write its pid", WAIT_S)
    return int(pidfile.read_text())


def _kill_if_alive(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def test_the_servers_are_the_daemons_children_and_the_daemon_the_guardians(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("one"), _counter("two"))
    guardian = daemon.start("--linger", "600")
    servers = [_bump("one", "--daemon")[1], _bump("two", "--daemon")[1]]
    status = daemon.status()
    assert status is not None and status["guardian"] is True and status["watchdog_pid"] == guardian.pid
    pid = int(str(status["pid"]))
    assert psutil.Process(pid).ppid() == guardian.pid
    for server in servers:  # no reaper process between the daemon and its servers
        assert psutil.Process(server).ppid() == pid
    tree = psutil.Process(guardian.pid).children(recursive=True)
    assert [p.pid for p in tree if any(a.endswith("_reaper.py") for a in p.cmdline())] == []
    assert "mcpmux" in " ".join(psutil.Process(pid).cmdline())
    assert os.getpgid(pid) == pid  # its own group: a signal for the guardian's group reaches it once


def test_a_stopped_servers_stray_lives_while_a_server_runs_and_is_ended_once_none_does(
    daemon: Daemon, project: Path
) -> None:
    server, pidfile = _stray_server(project, idle_timeout_s=1.0)
    _write_config(project, server, _counter("counter", idle_timeout_s=3.0))
    daemon.start("--linger", "600")
    stray = None
    try:
        assert cli("--daemon", "call", "strays:ping")[0] == 0
        stray = _stray_pid(pidfile, daemon)
        _bump("counter", "--daemon")  # another server still runs when `strays` stops: it may own the stray
        daemon.wait_for(lambda: "strays" not in daemon.server_pids(), "the idle server to stop", WAIT_S)
        if "counter" in daemon.server_pids():
            assert not _gone(stray), "a stray was ended while another server ran"
        daemon.wait_for(lambda: daemon.server_pids() == {}, "every idle server to stop", WAIT_S)
        daemon.wait_for(lambda: _gone(stray), "the guardian to end the stray once no server runs", WAIT_S)
        assert daemon.status() is not None  # the daemon itself goes on
    finally:
        if stray is not None:
            _kill_if_alive(stray)


def test_a_sigkilled_daemons_servers_and_their_strays_are_ended_by_the_guardian(daemon: Daemon, project: Path) -> None:
    server, pidfile = _stray_server(project)
    _write_config(project, server, _counter("counter"))
    guardian = daemon.start("--linger", "600")
    stray = None
    try:
        assert cli("--daemon", "call", "strays:ping")[0] == 0
        _, counter = _bump("counter", "--daemon")
        stray = _stray_pid(pidfile, daemon)
        servers = list(daemon.server_pids().values())
        killed = daemon.kill()
        assert guardian.wait(WAIT_S) == -signal.SIGKILL  # it reports how its daemon died
        for pid in (killed, counter, stray, *servers):
            assert _gone(pid), f"process {pid} outlived the SIGKILLed daemon"
    finally:
        if stray is not None:
            _kill_if_alive(stray)


def test_a_killed_guardian_stops_the_daemon_and_its_servers(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    guardian = daemon.start("--linger", "600")
    _, server = _bump("counter", "--daemon")
    status = daemon.status()
    assert status is not None
    pid = int(str(status["pid"]))
    guardian.kill()
    guardian.wait(WAIT_S)
    daemon.wait_for(lambda: _gone(pid), "the daemon to stop after its guardian died", WAIT_S)
    daemon.wait_for(lambda: _gone(server), "the daemon to stop its server", WAIT_S)
    assert not daemon.socket.exists()  # it stopped cleanly: the socket removed


def test_sigterm_to_the_guardian_stops_the_daemon_cleanly_once(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    guardian = daemon.start("--linger", "600")
    _, server = _bump("counter", "--daemon")
    guardian.send_signal(signal.SIGTERM)
    assert guardian.wait(WAIT_S) == 0
    assert _gone(server)
    log = daemon.log.read_text()
    assert log.count("received SIGTERM; stopping") == 1, log[-2000:]
    assert "Traceback" not in log, log[-2000:]
    deadline = time.monotonic() + WAIT_S
    while daemon.socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not daemon.socket.exists()
