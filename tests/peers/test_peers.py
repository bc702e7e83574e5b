"""The pinned reference peers really start and answer, driven by the official SDK, and stay on loopback."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import mcp_types
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client._transport import TransportStreams as Streams  # the SDK names the pair only here
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.peers import fixtures
from tests.peers.fixtures import (
    INSTALL_HINT,
    PeerServer,
    PeersNotInstalledError,
    conformance_cli,
    everything_js,
    inspector_cli,
    netns_available,
    netns_command,
    node22,
    run_everything,
    stdio_command,
    stop_process_group,
)

pytestmark = [pytest.mark.peers, pytest.mark.subprocess]

CALL_TIMEOUT_S = 20.0


async def _tool_names(transport: AbstractAsyncContextManager[Streams]) -> set[str]:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with transport as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            return {tool.name for tool in listed.tools}


@asynccontextmanager
async def _stdio(peer: str, cwd: Path, *args: str) -> AsyncIterator[Streams]:
    command, argv = stdio_command(peer, *args)
    with (cwd / f"{peer}.stderr").open("w") as errlog:
        async with stdio_client(StdioServerParameters(command=command, args=argv, cwd=cwd), errlog=errlog) as streams:
            yield streams


def _stdio_args(peer: str, tmp_path: Path, git_repo: Path) -> list[str]:
    return {
        "filesystem": [str(tmp_path)],
        "memory": [str(tmp_path / "memory.jsonl")],
        "git": [str(git_repo)],
    }.get(peer, [])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("peer", "known_tool"),
    [
        ("everything", "echo"),
        ("filesystem", "list_directory"),
        ("memory", "create_entities"),
        ("time", "get_current_time"),
        ("git", "git_status"),
    ],
)
async def test_each_stdio_peer_starts_and_lists_its_tools(
    peer: str, known_tool: str, tmp_path: Path, git_repo: Path
) -> None:
    names = await _tool_names(_stdio(peer, tmp_path, *_stdio_args(peer, tmp_path, git_repo)))
    assert known_tool in names


@pytest.mark.anyio
async def test_everything_echoes_over_stdio(tmp_path: Path) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with _stdio("everything", tmp_path) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"message": "hello peers"})
    assert isinstance(result.content[0], mcp_types.TextContent)
    assert "hello peers" in result.content[0].text


@pytest.mark.anyio
@pytest.mark.network
async def test_everything_answers_over_streamable_http(everything_http: PeerServer) -> None:
    async with httpx2.AsyncClient() as http:
        names = await _tool_names(streamable_http_client(everything_http.url, http_client=http))
    assert "echo" in names


@pytest.mark.anyio
@pytest.mark.network
async def test_everything_answers_over_sse(everything_sse: PeerServer) -> None:
    names = await _tool_names(sse_client(everything_sse.url))
    assert "echo" in names


@pytest.mark.network
@pytest.mark.parametrize("server", ["everything_http", "everything_sse"])
def test_the_preload_keeps_everything_on_loopback(server: str, request: pytest.FixtureRequest) -> None:
    peer: PeerServer = request.getfixturevalue(server)
    listening = [c.laddr for c in psutil.Process(peer.pid).net_connections("inet") if c.status == psutil.CONN_LISTEN]
    assert listening, "server-everything listens on no socket"
    assert {(addr.ip, addr.port) for addr in listening} == {("127.0.0.1", peer.port)}


def test_the_node22_binary_runs() -> None:
    version = subprocess.run([node22(), "--version"], capture_output=True, text=True, check=True, timeout=30)
    assert version.stdout.startswith("v22.")


def test_the_conformance_cli_prints_its_version_and_scenarios() -> None:
    version = subprocess.run([*conformance_cli(), "--version"], capture_output=True, text=True, check=True, timeout=30)
    scenarios = subprocess.run([*conformance_cli(), "list"], capture_output=True, text=True, check=True, timeout=30)
    assert version.stdout.strip() == "0.1.16"
    assert "server-initialize" in scenarios.stdout
    assert "tools_call" in scenarios.stdout


@pytest.mark.slow
def test_the_inspector_cli_lists_everything_tools_over_stdio(tmp_path: Path) -> None:
    target = [str(node22()), str(everything_js()), "stdio"]
    listed = subprocess.run(
        [*inspector_cli(), *target, "--method", "tools/list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
    )
    assert listed.returncode == 0, listed.stderr
    assert "echo" in {tool["name"] for tool in json.loads(listed.stdout)["result"]["tools"]}


def test_a_loopback_only_namespace_has_only_lo() -> None:
    if not netns_available():
        pytest.skip("no network namespace here (needs root, unshare, ip): the Node preload is the only guard")
    links = subprocess.run(netns_command(["ip", "-o", "link"]), capture_output=True, text=True, check=True, timeout=30)
    assert [line.split(":")[1].strip() for line in links.stdout.splitlines()] == ["lo"]


def test_stopping_a_process_group_kills_its_grandchildren() -> None:
    sleeper = "import time; time.sleep(60)"
    script = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {sleeper!r}]); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    stop_process_group(process, timeout_s=5)
    assert process.returncode is not None


class SlowToDie(subprocess.Popen[bytes]):
    """A child whose short waits all time out, as on a loaded machine where a kill takes seconds to act."""

    def wait(self, timeout: float | None = None) -> int:
        if timeout is not None and timeout < 1:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return super().wait(timeout)


def test_stopping_a_process_group_always_reaps_the_leader() -> None:
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(60)"
    process = SlowToDie([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    assert process.stdout is not None
    with process.stdout:
        process.stdout.readline()  # SIGTERM is ignored from here on
        with contextlib.suppress(AssertionError):
            stop_process_group(process, timeout_s=0.5)
    # Reaped: an unreaped Popen is a ResourceWarning that fails a later test under filterwarnings=error.
    assert process.returncode is not None


def test_a_missing_install_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fixtures, "_npm_installed", lambda: False)
    with pytest.raises(PeersNotInstalledError, match=INSTALL_HINT):
        node22()


@pytest.mark.network
def test_a_port_taken_by_another_process_is_retried_not_mistaken_for_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = [squatter.getsockname()[1]]
        real_free_port = fixtures.free_port
        monkeypatch.setattr(fixtures, "free_port", lambda: taken.pop() if taken else real_free_port())
        with run_everything("streamableHttp") as server:
            assert server.port != squatter.getsockname()[1]
            assert psutil.pid_exists(server.pid)
