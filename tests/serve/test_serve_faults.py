"""``mcpmux serve`` facing real-world faults (issue 14): a busy port, an upstream that is slow to start."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.gateway.serving import MCPMUX, isolated_env, mcpmux

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network]

WAIT_S = 30
GATE_WAIT_S = 120
# A real stdio MCP server whose start waits until a file exists (a server that takes its time).
SERVER = f"""
import os, sys, time
gate, name = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + {GATE_WAIT_S}
while gate != "-" and not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
from mcp.server.mcpserver import MCPServer
server = MCPServer(name)

@server.tool(name=name + "_tool")
def tool() -> str:
    return name

server.run()
"""


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]


@pytest.mark.parametrize("face", ["--http", "--ws", "--tcp"])
def test_a_port_in_use_is_one_error_line_with_a_hint_and_exit_code_2(tmp_path: Path, busy_port: int, face: str) -> None:
    config = tmp_path / "mcpmux.json"
    workspace = {"name": "workspace", "type": "builtin", "root": str(tmp_path)}
    config.write_text(json.dumps({"mcp": {"servers": [workspace]}}))
    done = mcpmux(tmp_path, config, "serve", face, f"127.0.0.1:{busy_port}")
    lines = [line for line in done.stderr.splitlines() if not line.startswith("mcpmux: ")]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0] == f"Error: invalid configuration: <cli>: {face}: cannot listen on 127.0.0.1:{busy_port}: " + (
        "the address is already in use"
    )
    assert lines[1].startswith("hint: choose another port") and len(lines) == 2, done.stderr


@pytest.mark.slow
async def test_stdio_answers_initialize_before_a_slow_upstream_and_announces_it_when_it_arrives(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    servers = [
        {"name": name, "type": "stdio", "command": sys.executable, "args": ["-c", SERVER, gate_arg, name]}
        for name, gate_arg in (("fast", "-"), ("slow", str(gate)))
    ]
    config = tmp_path / "mcpmux.json"
    settings = {"connect_timeout_ms": GATE_WAIT_S * 1000}
    config.write_text(json.dumps({"mcp": {"servers": servers, "settings": settings, "security": {"pinning": "off"}}}))
    changed = anyio.Event()

    async def on_message(message: object) -> None:
        nonlocal changed
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def tool_names() -> set[str]:
        return {tool.name for tool in (await session.list_tools()).tools}

    async def wait_for_tool(name: str) -> None:
        nonlocal changed
        with anyio.fail_after(WAIT_S):
            while name not in await tool_names():
                await changed.wait()
                changed = anyio.Event()

    params = StdioServerParameters(command=MCPMUX, args=["--config", str(config), "serve"], env=isolated_env(tmp_path))
    with (tmp_path / "serve.stderr").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, message_handler=on_message) as session,
        ):
            # The slow server cannot start before the gate opens: an answer now proves nobody waited for it.
            with anyio.fail_after(WAIT_S):
                await session.initialize()
            await wait_for_tool("fast__fast_tool")
            assert "slow__slow_tool" not in await tool_names()
            gate.touch()
            await wait_for_tool("slow__slow_tool")
            result = await session.call_tool("slow__slow_tool", {})
            assert not result.is_error
