"""The manager against real reference servers at once: routing, failures, restarts, lazy start."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
import pytest

from mcpmux.config.models import (
    Config,
    ServerConfig,
    Settings,
    StdioServerConfig,
    StreamableHttpServerConfig,
)
from mcpmux.connection import ClientCallbacks
from mcpmux.errors import ConfigError, ToolNotFound, UsageError
from mcpmux.manager import Manager, ServerState, StateChanged
from mcpmux.provider_names import NameTable, get_profile
from tests.peers.fixtures import PeerServer, stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess]

SETTINGS = Settings(connect_timeout_ms=20_000, timeout_ms=20_000)


def stdio_peer(name: str, peer: str, *args: str, **extra: Any) -> StdioServerConfig:
    command, argv = stdio_command(peer, *args)
    return StdioServerConfig(name=name, command=command, args=tuple(argv), **extra)


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def config(*servers: ServerConfig, settings: Settings = SETTINGS) -> Config:
    return Config(servers=servers, settings=settings)


@pytest.fixture
def four_servers(everything_http: PeerServer, tmp_path: Path) -> Config:
    (tmp_path / "notes.txt").write_text("hello from the filesystem peer\n", encoding="utf-8")
    return config(
        stdio_peer("ev", "everything", env={"MCPMUX_MARK": "stdio-instance"}),
        StreamableHttpServerConfig(name="evhttp", url=everything_http.url),
        stdio_peer("fs", "filesystem", str(tmp_path)),
        stdio_peer("time", "time"),
    )


async def test_four_real_servers_are_listed_namespaced_and_routed(four_servers: Config, tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Manager(four_servers, catalog=False) as mux:
            states = {s.name: s.state for s in mux.status()}
            assert states == dict.fromkeys(["ev", "evhttp", "fs", "time"], ServerState.CONNECTED)
            names = {t.name for t in mux.tools()}
            assert {"ev:echo", "evhttp:echo", "fs:read_text_file", "time:get_current_time"} <= names
            # The same tool on two servers: each call reaches its own server.
            assert "stdio-instance" in text(await mux.call_tool("ev:get-env"))
            assert "stdio-instance" not in text(await mux.call_tool("evhttp:get-env"))
            assert text(await mux.call_tool("evhttp:echo", {"message": "hi"})) == "Echo: hi"
            notes = await mux.call_tool("fs:read_text_file", {"path": str(tmp_path / "notes.txt")})
            assert "hello from the filesystem peer" in text(notes)
            now = await mux.call_tool("time:get_current_time", {"timezone": "UTC"})
            assert '"timezone": "UTC"' in text(now)
            with pytest.raises(ToolNotFound) as caught:
                await mux.call_tool("time:get_curent_time")
            assert "time:get_current_time" in caught.value.suggestions


async def test_every_real_tool_name_is_valid_for_every_provider_profile(four_servers: Config) -> None:
    with anyio.fail_after(60):
        async with Manager(four_servers, catalog=False) as mux:
            canonical = [t.name for t in mux.tools()]
    assert len(canonical) > 30
    for profile in ("openai", "anthropic", "gemini", "mcp"):
        table = NameTable(canonical, profile)
        rule = get_profile(profile)
        for name in canonical:
            provider = table.to_provider(name)
            assert rule.is_valid(provider), (profile, name, provider)
            assert table.to_canonical(provider) == name


async def test_one_server_failing_to_start_leaves_the_others_working(tmp_path: Path) -> None:
    broken = StdioServerConfig(name="broken", command="definitely-not-installed-mcp-server")
    crashing = StdioServerConfig(name="crashing", command="sh", args=("-c", "echo boom >&2; exit 3"))
    with anyio.fail_after(60):
        async with Manager(config(broken, crashing, stdio_peer("time", "time")), catalog=False) as mux:
            status = {s.name: s for s in mux.status()}
            assert status["time"].state is ServerState.CONNECTED
            assert status["broken"].state is ServerState.FAILED
            assert "not found on PATH" in status["broken"].reason
            # Its first attempt failed; by now it may be failed, degraded, or already retrying (starting).
            assert status["crashing"].state in (ServerState.FAILED, ServerState.DEGRADED, ServerState.STARTING)
            assert "boom" in (status["crashing"].last_error or "")
            assert '"timezone"' in text(await mux.call_tool("time:get_current_time", {"timezone": "UTC"}))


async def test_a_server_killed_while_idle_is_restarted_transparently_on_the_next_call() -> None:
    with anyio.fail_after(60):
        async with Manager(config(stdio_peer("ev", "everything")), catalog=False) as mux:
            pid = mux.status()[0].pid
            assert pid is not None
            async with mux.subscribe() as events:
                os.kill(pid, signal.SIGKILL)
                # Idle: nothing is in flight when it dies. A call already sent to a dying server
                # fails instead (a retry could run a tool twice).
                async for event in events:
                    if isinstance(event, StateChanged) and event.old is ServerState.CONNECTED:
                        break
            result = await mux.call_tool("ev:echo", {"message": "again"})
            assert text(result) == "Echo: again"
            status = mux.status()[0]
            assert status.restarts == 1 and status.pid != pid
            assert [t.state for t in status.history].count(ServerState.CONNECTED) == 2
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_tools_that_appear_after_list_changed_are_picked_up() -> None:
    # server-everything registers its sampling and elicitation tools only for clients that offer
    # those capabilities, and announces them with tools/list_changed right after initialization.
    async def sampling(server: str, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled"), model="test-model"
        )

    async def elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    callbacks = ClientCallbacks(sampling=sampling, elicitation=elicitation)
    with anyio.fail_after(60):
        async with Manager(config(stdio_peer("ev", "everything")), callbacks=callbacks, catalog=False) as mux:
            while "ev:trigger-sampling-request" not in {t.name for t in mux.tools()}:
                async with mux.subscribe() as events:
                    await events.receive()
            result = await mux.call_tool("ev:trigger-sampling-request", {"prompt": "hello"})
            assert "sampled" in text(result)


async def test_lazy_servers_are_served_from_the_catalog_and_started_on_first_call(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.db"
    lazy_time = stdio_peer("time", "time", lazy=True)
    with anyio.fail_after(60):
        async with Manager(config(lazy_time), catalog=catalog) as mux:  # cold: started once to learn its lists
            assert mux.status()[0].state is ServerState.CONNECTED
        children_before = len(psutil.Process().children(recursive=True))
        async with Manager(config(lazy_time), catalog=catalog) as mux:
            status = mux.status()[0]
            assert (status.state, status.pid) == (ServerState.CONFIGURED, None)
            assert len(psutil.Process().children(recursive=True)) == children_before
            assert "time:get_current_time" in {t.name for t in mux.tools()}
            result = await mux.call_tool("time:get_current_time", {"timezone": "UTC"})
            assert '"timezone": "UTC"' in text(result)
            assert mux.status()[0].state is ServerState.CONNECTED


async def test_the_seed_shapes_mcpmanager_and_mcpclient_work_on_real_servers() -> None:
    from mcpmux import MCPClient, MCPManager

    with anyio.fail_after(60):
        legacy = MCPManager([stdio_peer("time", "time")], SETTINGS)
        await legacy.start()
        try:
            tools = legacy.get_all_tools()
            assert {"name", "server", "description", "input_schema"} <= set(tools[0])
            result = await legacy.call_tool("time:get_current_time", {"timezone": "UTC"})
            assert '"timezone": "UTC"' in text(result)
        finally:
            await legacy.stop()
        client = MCPClient(stdio_peer("ev", "everything"), SETTINGS)
        await client.connect()
        try:
            assert "echo" in [t.name for t in await client.list_tools()]
            assert text(await client.call_tool("echo", {"message": "x"})) == "Echo: x"
            resources = await client.list_resources()
            read = await client.read_resource(resources[0].uri)
            assert read.contents
        finally:
            await client.close()
        # The dolphin-style shape: the server's command line as keywords, start()/stop(), or async with.
        command, args = stdio_command("everything")
        keyworded = MCPClient(server_name="ev", command=command, args=args, env={"FIELD": "x"})
        await keyworded.start()
        try:
            assert text(await keyworded.call_tool("echo", {"message": "y"})) == "Echo: y"
        finally:
            await keyworded.stop()
        async with MCPClient(server_name="ev2", command=command, args=args) as scoped:
            assert "echo" in [t.name for t in await scoped.list_tools()]
    with pytest.raises(UsageError, match="needs a server"):
        MCPClient()
    with pytest.raises(UsageError, match="not both"):
        MCPClient(stdio_peer("ev", "everything"), server_name="ev")
    with pytest.raises(ConfigError):
        MCPClient(server_name="Bad Name!", command="x")


async def test_the_global_sandbox_applies_to_every_stdio_server() -> None:
    from mcpmux.config.models import SandboxConfig, SecurityConfig
    from mcpmux.processes.sandbox import sandbox_backend

    backend = sandbox_backend()
    if backend.name == "none":
        pytest.skip(backend.explain())
    security = SecurityConfig(sandbox=SandboxConfig(enabled=True, network=False))
    sandboxed = Config(servers=(stdio_peer("time", "time"),), settings=SETTINGS, security=security)
    with anyio.fail_after(60):
        async with Manager(sandboxed, catalog=False) as mux:
            status = mux.status()[0]
            assert status.state is ServerState.CONNECTED and status.pid is not None
            launcher = " ".join(psutil.Process(status.pid).cmdline())
            assert ("bwrap" if backend.name == "bubblewrap" else "_landlock_exec") in launcher
            assert '"timezone": "UTC"' in text(await mux.call_tool("time:get_current_time", {"timezone": "UTC"}))


async def test_the_sandbox_confines_the_builtin_workspaces_commands(tmp_path: Path) -> None:
    from mcpmux.config.models import BuiltinServerConfig, SandboxConfig, SecurityConfig
    from mcpmux.processes.sandbox import sandbox_backend

    backend = sandbox_backend()
    if backend.name == "none":
        pytest.skip(backend.explain())
    root, outside = tmp_path / "root", tmp_path / "outside.txt"
    root.mkdir()
    outside.write_text("secret outside the workspace\n", encoding="utf-8")
    security = SecurityConfig(sandbox=SandboxConfig(enabled=True, network=False))
    config = Config(servers=(BuiltinServerConfig(name="workspace", root=root),), settings=SETTINGS, security=security)
    with anyio.fail_after(60):
        async with Manager(config, catalog=False) as mux:
            make = {"command": "echo made > inside.txt && cat inside.txt"}
            inside = await mux.call_tool("workspace:execute_shell", make)
            assert "made" in text(inside) and (root / "inside.txt").read_text() == "made\n"
            escaped = await mux.call_tool("workspace:execute_shell", {"command": f"cat {outside}"})
            assert "secret outside the workspace" not in text(escaped)
            assert "exit code" in text(escaped).lower()
