"""Processes that try to outlive mcpmux (issue 15 item 8), with real processes checked by PID.

- ``execute_shell`` starting a ``setsid`` daemon (the sandbox off): gone when the call returns.
- A stdio server that double-forks a ``sleep`` daemon into its own session: gone when the manager
  closes, and gone when the mcpmux process itself is SIGKILLed.
- A caller cancelled (Ctrl-C, a deadline) in the instant between the fork of a child and the
  connection of its pipes: asyncio then SIGKILLs the reaper alone, and the command the reaper had
  already forked lived on (a CI run found one after Ctrl-C during connect). Forced here by blocking
  the loop until the command exists, then cancelling: no process is left, for a stdio server and
  for ``execute_shell``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import psutil
import pytest
from mcp import ClientSession

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.manager import Manager
from mcpmux.processes._reaper import AVAILABLE as REAPER_AVAILABLE
from mcpmux.servers import build_server
from mcpmux.servers.workspace_exec import run_command
from mcpmux.transports import open_transport
from mcpmux.transports.inprocess import open_mcp_server
from tests.servers._client import call_ok

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

WAIT_S = 30.0
SLEEPER = "import time; time.sleep(120)"  # a child that ignores its stdin's end, as slow servers do

# A server that, like a careless daemon launcher, double-forks `sleep` into a session of its own
# (out of mcpmux's process group), then serves MCP on stdio.
DAEMONIZING_SERVER = """
import os, sys
pidfile = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open(pidfile + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(pidfile + ".tmp", pidfile)
        os.execvp("sleep", ["sleep", "600"])
    os._exit(0)
os.wait()
from mcp.server.mcpserver import MCPServer
server = MCPServer("daemonizer")

@server.tool()
def ping() -> str:
    return "pong"

server.run()
"""

# The host, as its own process: runs a manager over the daemonizing server and reports ready.
HOST = """
import sys, anyio
from mcpmux.config.models import Config, StdioServerConfig
from mcpmux.manager import Manager

async def main() -> None:
    server = StdioServerConfig(name="daemonizer", command=sys.executable, args=(sys.argv[1], sys.argv[2]))
    async with Manager(Config(servers=(server,)), catalog=False) as mux:
        await mux.call_tool("daemonizer:ping")
        print("ready", flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _wait_gone(pid: int) -> bool:
    with anyio.move_on_after(WAIT_S):
        while not _gone(pid):  # noqa: ASYNC110 - nothing notifies us of another process's death
            await anyio.sleep(0.05)
        return True
    return False


async def _read_pid(pidfile: Path) -> int:
    with anyio.fail_after(WAIT_S):
        while not await anyio.Path(pidfile).exists():  # noqa: ASYNC110 - another process writes it
            await anyio.sleep(0.05)
    with open(pidfile, encoding="utf-8") as handle:  # noqa: ASYNC230 - a few bytes, written atomically
        return int(handle.read())


def _kill_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    script = tmp_path / "daemonizer.py"
    script.write_text(DAEMONIZING_SERVER, encoding="utf-8")
    return script


async def test_a_setsid_grandchild_of_execute_shell_is_gone_after_the_call(tmp_path: Path) -> None:
    server = build_server("workspace", root=tmp_path)
    command = "setsid sh -c 'sleep 300 </dev/null >/dev/null 2>&1 & echo $!'"
    async with (
        open_mcp_server(server, name="workspace", describe="attack") as streams,
        ClientSession(streams.read, streams.write, read_timeout_seconds=60) as s,
    ):
        with anyio.fail_after(WAIT_S):
            await s.initialize()
            out = await call_ok(s, "execute_shell", command=command)
    pid = int(out.split("--- stdout ---\n")[1].split()[0])
    try:
        assert await _wait_gone(pid), f"the setsid grandchild {pid} outlived execute_shell"
    finally:
        _kill_if_alive(pid)


async def test_a_double_forked_daemon_of_a_stdio_server_dies_when_the_manager_closes(
    tmp_path: Path, server_script: Path
) -> None:
    pidfile = tmp_path / "daemon.pid"
    server = StdioServerConfig(name="daemonizer", command=sys.executable, args=(str(server_script), str(pidfile)))
    with anyio.fail_after(WAIT_S):
        async with Manager(Config(servers=(server,), settings=Settings()), catalog=False) as mux:
            await mux.call_tool("daemonizer:ping")
            daemon = await _read_pid(pidfile)
            assert not _gone(daemon)
    try:
        assert await _wait_gone(daemon), f"the daemon {daemon} outlived the manager"
    finally:
        _kill_if_alive(daemon)


def _start_host(tmp_path: Path, server_script: Path, pidfile: Path) -> subprocess.Popen[str]:
    host = tmp_path / "host.py"
    host.write_text(HOST, encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, str(host), str(server_script), str(pidfile)], stdout=subprocess.PIPE, text=True
    )


async def test_a_double_forked_daemon_dies_when_mcpmux_itself_is_sigkilled(tmp_path: Path, server_script: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    host = _start_host(tmp_path, server_script, pidfile)
    daemon = None
    try:
        assert host.stdout is not None
        with anyio.fail_after(60):
            line = await anyio.to_thread.run_sync(host.stdout.readline)
        assert line.strip() == "ready", line
        daemon = await _read_pid(pidfile)
        server_pids = [p.pid for p in psutil.Process(host.pid).children(recursive=True)]
        host.kill()
        host.wait()
        assert await _wait_gone(daemon), f"the daemon {daemon} outlived the SIGKILLed host"
        for pid in server_pids:
            assert await _wait_gone(pid), f"process {pid} of the server outlived the SIGKILLed host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
        if daemon is not None:
            _kill_if_alive(daemon)


def _with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if marker in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


async def _cancel_between_fork_and_pipes(scope: anyio.CancelScope, marker: str) -> None:
    """Cancel ``scope`` once the reaper has forked its command, before the spawn's pipes can connect.

    The reaper (its argv ends with the command's, ``marker`` included) appears at the spawn's fork;
    asyncio then connects its pipes over a few loop iterations. Blocking the loop here until the
    reaper's own child exists holds the spawn in that window, and the cancel lands in it.
    """
    me = os.getpid()
    with anyio.fail_after(WAIT_S):
        while not (spawned := [p for p in _with_marker(marker) if p.ppid() == me]):
            await anyio.lowlevel.checkpoint()  # every loop iteration: the fork happens in one of them
    reaper = spawned[0]
    deadline = anyio.current_time() + WAIT_S
    while not reaper.children() and anyio.current_time() < deadline:
        time.sleep(0.01)  # noqa: ASYNC251 - blocking on purpose: the spawn must not progress
    assert reaper.children(), "the reaper never forked its command"
    scope.cancel()


async def _assert_none_left(marker: str) -> None:
    try:
        with anyio.move_on_after(WAIT_S):
            while _with_marker(marker):  # noqa: ASYNC110 - nothing notifies us of another process's death
                await anyio.sleep(0.05)
        assert [p.pid for p in _with_marker(marker)] == [], "a process of the cancelled spawn outlived it"
    finally:
        for process in _with_marker(marker):
            _kill_if_alive(process.pid)


@pytest.mark.slow
@pytest.mark.skipif(not REAPER_AVAILABLE, reason="the reaper runs on Linux only")
async def test_a_stdio_spawn_cancelled_before_its_pipes_connect_leaves_no_process() -> None:
    marker = f"mcpmux-cancelled-spawn-{os.getpid()}-{time.monotonic_ns()}"
    server = StdioServerConfig(name="cancelled", command=sys.executable, args=("-c", SLEEPER, marker))
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_between_fork_and_pipes, scope, marker)
            async with open_transport(server, Settings()):
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    await _assert_none_left(marker)


@pytest.mark.skipif(not REAPER_AVAILABLE, reason="the reaper runs on Linux only")
async def test_an_execute_shell_spawn_cancelled_before_its_pipes_connect_leaves_no_process(tmp_path: Path) -> None:
    marker = f"mcpmux-cancelled-command-{os.getpid()}-{time.monotonic_ns()}"
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_between_fork_and_pipes, scope, marker)
            await run_command([sys.executable, "-c", SLEEPER, marker], tmp_path, WAIT_S * 4, 1024)
    assert scope.cancelled_caught
    await _assert_none_left(marker)
