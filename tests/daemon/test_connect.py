"""``mcpmux connect``: what another host (Claude, Cursor, VS Code) runs instead of the server, with real SDK clients."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.daemon.conftest import REPO, Daemon

pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(300)]

WAIT_S = 60.0
# A loaded 2-core machine can take longer than the default to start a Python child.
SLOW_MACHINE = {"connect_timeout_ms": 120_000}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    command = [sys.executable, "-m", "mcpmux.testing", "--module", "tests.daemon.counter:counter"]
    server = {"name": "counter", "command": command[0], "args": command[1:], "cwd": str(REPO)}
    (tmp_path / "mcpmux.yaml").write_text(
        json.dumps({"mcp": {"servers": [server], "settings": SLOW_MACHINE}}), encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


@asynccontextmanager
async def _session(daemon: Daemon, project: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpmux", "connect", *args], env=daemon.env, cwd=str(project)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(WAIT_S):
            await session.initialize()
        yield session


async def _listed(session: ClientSession, tool: str) -> list[str]:
    """The tool names once ``tool`` is among them: over stdio the gateway answers before its upstreams
    connect (at most 5 s), and a loaded machine may take longer; a host would wait for list_changed."""
    with anyio.fail_after(WAIT_S):
        while True:
            names = [t.name for t in (await session.list_tools()).tools]
            if tool in names:
                return names
            await anyio.sleep(0.2)


async def _bump(session: ClientSession, tool: str = "bump") -> int:
    with anyio.fail_after(WAIT_S):
        result = await session.call_tool(tool, {})
    text = result.content[0].text  # type: ignore[union-attr]
    return int(text.partition(" ")[0])


@pytest.mark.slow
def test_two_host_sessions_share_one_warm_instance_through_connect(daemon: Daemon, project: Path) -> None:
    daemon.env["MCPMUX_DAEMON"] = "on"  # no silent fallback to a server of its own
    daemon.start("--linger", "600")

    async def main() -> tuple[list[str], list[int], int]:
        async with _session(daemon, project, "counter") as one, _session(daemon, project, "counter") as two:
            tools = await _listed(one, "bump")
            counts = [await _bump(one), await _bump(two), await _bump(one)]
            status = await anyio.to_thread.run_sync(daemon.status) or {}
            clients = sum(s["clients"] for s in status["servers"])  # type: ignore[attr-defined]
            return tools, counts, clients

    tools, counts, clients = anyio.run(main)
    assert tools == ["bump", "wait", "big"]
    assert counts == [1, 2, 3]
    assert clients == 2
    assert len(daemon.server_pids()) == 1


@pytest.mark.slow
def test_connect_all_serves_every_server_under_gateway_names(daemon: Daemon, project: Path) -> None:
    daemon.env["MCPMUX_DAEMON"] = "on"
    daemon.start("--linger", "600")

    async def main() -> tuple[list[str], int]:
        async with _session(daemon, project, "--all") as session:
            tools = await _listed(session, "counter__bump")
            return tools, await _bump(session, "counter__bump")

    assert anyio.run(main) == (["counter__bump", "counter__wait", "counter__big"], 1)
    assert list(daemon.server_pids()) == ["counter"]


def test_connect_without_a_daemon_serves_the_server_itself(daemon: Daemon, project: Path) -> None:
    daemon.env["MCPMUX_DAEMON"] = "off"

    async def main() -> int:
        async with _session(daemon, project, "counter") as session:
            await _listed(session, "bump")
            return await _bump(session)

    assert anyio.run(main) == 1
    assert daemon.status() is None


@pytest.mark.slow
def test_connect_exits_3_with_one_line_when_the_daemon_is_killed(daemon: Daemon, project: Path) -> None:
    process = daemon.start("--linger", "600")
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpmux", "connect", "counter"],
        env=daemon.env, cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}},
    }  # fmt: skip
    try:
        shim.stdin.write(json.dumps(initialize).encode() + b"\n")
        shim.stdin.flush()
        assert json.loads(shim.stdout.readline())["id"] == 1
        daemon.kill()
        shim.wait(WAIT_S)  # stdin still open: only the daemon's end can end it
        _, err = shim.communicate(timeout=WAIT_S)
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.communicate(timeout=WAIT_S)
    process.wait(WAIT_S)
    assert shim.returncode == 3
    assert err.decode().strip().endswith("mcpmux connect: the daemon closed the connection (stopped or killed)")
