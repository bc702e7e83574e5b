"""``mcpmux connect SERVER|--all`` through the daemon is a standard-library byte relay; the daemon serves the session.

Checked from outside with real processes: the SDK's ``stdio_client`` (a real stdio host) gets the
same answers from server-everything and mcp-server-time with and without the daemon; a warm
``connect`` process has become ``python -m mcpmux.daemon.relay`` and loaded nothing but the
standard library and that module; a 5 MB result and many concurrent calls cross the relay; the
daemon killed mid-session is exit 3 with one line and no server left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.daemon.conftest import Daemon, cli
from tests.daemon.test_daemon_lifecycle import _counter, _write_config
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.timeout(600)]

WAIT_S = 120.0
BIG = 5 * 1024 * 1024
RELAY_MODULES = {"mcpmux", "mcpmux._lazy", "mcpmux._moved", "mcpmux._version", "mcpmux.daemon"}  # relay: __main__
HEAVY_PREFIXES = ("pydantic", "mcp", "anyio", "click", "starlette", "httpx", "sqlalchemy", "yaml", "ruamel")
IMPORT_HEADER = "import time: self [us] | cumulative | imported package"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}},
}  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    everything, everything_args = stdio_command("everything")
    time_command, time_args = stdio_command("time")
    _write_config(
        tmp_path,
        {"name": "everything", "command": everything, "args": everything_args},
        {"name": "time", "command": time_command, "args": time_args},
        _counter("counter"),
        settings={"timeout_ms": 120_000},
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


@asynccontextmanager
async def _session(env: dict[str, str], project: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpmux", "connect", *args], env=env, cwd=str(project)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(WAIT_S):
            await session.initialize()
        yield session


async def _tools_once_listed(session: ClientSession, expected: int, *, named: tuple[str, ...] = ()) -> list[Any]:
    """The tool list once it holds ``expected`` tools and every one of ``named``.

    Over stdio the gateway answers before its upstreams connect, and they connect in any order:
    with ``--all``, everything's ten tools can be listed before counter's three.
    """
    with anyio.fail_after(WAIT_S):
        while True:
            tools = (await session.list_tools()).tools
            if len(tools) >= expected and set(named) <= {t.name for t in tools}:
                return sorted(tools, key=lambda t: t.name)
            await anyio.sleep(0.2)


async def _answers(env: dict[str, str], project: Path, target: str) -> dict[str, Any]:
    """What a host sees of ``target`` (``--all`` or one server): tools, and a few calls' results."""
    every = target == "--all"

    def name(server: str, tool: str) -> str:
        return f"{server}__{tool}" if every else tool

    async with _session(env, project, target) as session:
        expected = {"--all": 3 + 2 + 10, "everything": 10, "time": 2}[target]  # at least so many
        named = ("counter__bump", "everything__echo", "time__convert_time") if every else ()  # one of each
        tools = await _tools_once_listed(session, expected, named=named)
        answers: dict[str, Any] = {"tools": [t.model_dump(mode="json") for t in tools]}
        with anyio.fail_after(WAIT_S):
            if every or target == "everything":
                echo = await session.call_tool(name("everything", "echo"), {"message": "same"})
                answers["echo"] = echo.model_dump(mode="json")
                total = await session.call_tool(name("everything", "get-sum"), {"a": 2, "b": 3})
                answers["sum"] = total.model_dump(mode="json")
                answers["prompts"] = [p.name for p in (await session.list_prompts()).prompts]
            if every or target == "time":
                arguments = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}
                converted = await session.call_tool(name("time", "convert_time"), arguments)
                answers["convert"] = converted.model_dump(mode="json")
            try:
                unknown = await session.call_tool(name("everything", "nosuch"), {})
                answers["unknown"] = unknown.model_dump(mode="json")
            except MCPError as exc:
                answers["unknown"] = (exc.code, str(exc))
    return answers


@pytest.mark.parametrize("target", ["--all", "everything", "time"])
def test_a_real_stdio_host_gets_the_same_answers_with_and_without_the_daemon(
    daemon: Daemon, project: Path, target: str
) -> None:
    daemon.start("--linger", "600")
    through = anyio.run(_answers, {**daemon.env, "MCPMUX_DAEMON": "on"}, project, target)
    assert daemon.server_pids(), "the daemon served nothing: the session did not go through it"
    alone = anyio.run(_answers, {**daemon.env, "MCPMUX_DAEMON": "off"}, project, target)
    assert through == alone


def _modules_after_exec(stderr: str) -> set[str]:
    """The modules the last interpreter of the process imported (``PYTHONPROFILEIMPORTTIME``: one header each)."""
    tail = stderr.rpartition(IMPORT_HEADER)[2]
    return {line.rpartition("|")[2].strip() for line in tail.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("target", ["--all", "counter"])
def test_a_warm_connect_process_is_a_standard_library_relay(daemon: Daemon, project: Path, target: str) -> None:
    daemon.start("--linger", "600")
    env = {**daemon.env, "MCPMUX_DAEMON": "on", "PYTHONPROFILEIMPORTTIME": "1"}
    log = project / f"connect-{target.strip('-')}.stderr"
    with log.open("wb") as stderr:  # a file: the import profile is larger than a pipe's buffer
        shim = subprocess.Popen(
            [sys.executable, "-m", "mcpmux", "connect", target], env=env, cwd=project,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    try:
        shim.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        shim.stdin.flush()
        answer = json.loads(shim.stdout.readline())
        cmdline = psutil.Process(shim.pid).cmdline()  # the same process the host started
        shim.communicate(timeout=WAIT_S)  # closes stdin: the host ends the session
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.communicate(timeout=WAIT_S)
    err = log.read_bytes()
    assert answer["id"] == 1 and "serverInfo" in answer["result"], answer
    assert cmdline[-3:-1] == ["-m", "mcpmux.daemon.relay"], cmdline
    assert shim.returncode == 0
    modules = _modules_after_exec(err.decode())
    assert "socket" in modules, err.decode()[-2000:]  # the relay's own imports were profiled
    ours = {m for m in modules if m == "mcpmux" or m.startswith("mcpmux.")}
    assert ours == RELAY_MODULES
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY_PREFIXES)
    assert heavy == [], f"the relay loaded {heavy}"


async def _big_and_many(env: dict[str, str], project: Path, target: str) -> tuple[int, list[int]]:
    prefix = "counter__" if target == "--all" else ""
    async with _session(env, project, target) as session:
        await _tools_once_listed(session, 3, named=(f"{prefix}big", f"{prefix}bump"))
        with anyio.fail_after(WAIT_S):
            big = await session.call_tool(f"{prefix}big", {"size": BIG})
        text = big.content[0].text  # type: ignore[union-attr]
        counts: list[int] = []

        async def bump() -> None:
            result = await session.call_tool(f"{prefix}bump", {})
            counts.append(int(result.content[0].text.partition(" ")[0]))  # type: ignore[union-attr]

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tg:
                for _ in range(50):
                    tg.start_soon(bump)
        return len(text), sorted(counts)


@pytest.mark.parametrize("target", ["--all", "counter"])
def test_the_relay_carries_a_5_mb_result_and_50_concurrent_calls(daemon: Daemon, project: Path, target: str) -> None:
    daemon.start("--linger", "600")
    size, counts = anyio.run(_big_and_many, {**daemon.env, "MCPMUX_DAEMON": "on"}, project, target)
    assert size == BIG
    assert counts == list(range(1, 51))  # each call answered once, by the one warm instance
    status = daemon.status() or {}
    assert [s["server"] for s in status["servers"]].count("counter") == 1  # type: ignore[attr-defined]


def test_connect_all_exits_3_with_one_line_when_the_daemon_is_killed_and_leaves_no_server(
    daemon: Daemon, project: Path
) -> None:
    process = daemon.start("--linger", "600")
    env = {**daemon.env, "MCPMUX_DAEMON": "on"}
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpmux", "connect", "--all"], env=env, cwd=project,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "counter__bump", "arguments": {}}}
    try:
        for message in (INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
            shim.stdin.write(json.dumps(message).encode() + b"\n")
        shim.stdin.flush()
        reply: dict[str, Any] = {}
        while reply.get("id") != 2:  # list changes may come first, as the servers arrive
            reply = json.loads(shim.stdout.readline())
        assert reply["result"]["content"][0]["text"].startswith("1 pid "), reply
        servers = list(daemon.server_pids().values())
        assert servers, "no warm server in the daemon"
        daemon.kill()
        shim.wait(WAIT_S)  # stdin still open: only the daemon's end can end it
        _, err = shim.communicate(timeout=WAIT_S)
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.communicate(timeout=WAIT_S)
    process.wait(WAIT_S)
    assert shim.returncode == 3
    assert err.decode().strip().splitlines() == ["mcpmux connect: the daemon closed the connection (stopped or killed)"]
    daemon.wait_for(lambda: not any(psutil.pid_exists(pid) for pid in servers), "the watchdog to stop the servers")


def test_two_all_sessions_share_a_machine_server_and_never_a_per_client_one(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("shared"), _counter("private", share="per-client"))
    daemon.start("--linger", "600")
    env = {**daemon.env, "MCPMUX_DAEMON": "on"}

    async def bump(session: ClientSession, tool: str) -> int:
        with anyio.fail_after(WAIT_S):
            result = await session.call_tool(tool, {})
        return int(result.content[0].text.partition(" ")[0])  # type: ignore[union-attr]

    async def main() -> list[int]:
        async with _session(env, tmp_path, "--all") as one, _session(env, tmp_path, "--all") as two:
            await _tools_once_listed(one, 6)
            await _tools_once_listed(two, 6)
            return [
                await bump(one, "shared__bump"), await bump(two, "shared__bump"),
                await bump(one, "private__bump"), await bump(two, "private__bump"), await bump(one, "private__bump"),
            ]  # fmt: skip

    assert anyio.run(main) == [1, 2, 1, 1, 2]  # one shared instance; each session its own private one
    # The daemon's guard audited the sessions' calls, naming the host (its initialize) and its pid.
    code, out, err = cli("--json", "audit", "--server", "shared")
    assert code == 0, err
    callers = {r.get("caller") or "" for r in json.loads(out) if r["face"] == "daemon"}
    assert any("(pid " in c and not c.startswith("mcpmux") for c in callers), callers


async def _denied_through_connect(env: dict[str, str], project: Path) -> tuple[list[str], str]:
    """The tools ``connect everything`` lists, and what calling ``get-env`` anyway answers."""
    async with _session(env, project, "everything") as session:
        names = [tool.name for tool in await _tools_once_listed(session, 1)]
        with anyio.fail_after(WAIT_S):
            try:
                result = await session.call_tool("get-env", {})
            except MCPError as exc:
                return names, str(exc)
    return names, "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_rule_written_with_a_servers_own_prefix_holds_through_connect_server(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """``connect everything`` serves the server under bare names; a deny rule written with its own prefix
    (``ev:get-env``) was not applied there (the server's environment came back), with or without the daemon."""
    everything, args = stdio_command("everything")
    server = {"name": "everything", "prefix": "ev", "command": everything, "args": args}
    security = {"denied_tools": ["ev:get-env"], "pinning": "off"}
    mcp = {"servers": [server], "security": security, "settings": {"connect_timeout_ms": 120_000}}
    (tmp_path / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    if mode == "on":
        daemon.start("--linger", "600")
    names, answer = anyio.run(_denied_through_connect, {**daemon.env, "MCPMUX_DAEMON": mode}, tmp_path)
    assert "echo" in names and "get-env" not in names  # denied: not listed, and not callable
    assert "no tool named 'get-env'" in answer, answer
