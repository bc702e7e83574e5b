"""The response envelope: ``ToolResult.capture`` lets a library caller branch instead of catching.

Against real servers (server-everything, server-filesystem and a Python server whose tool answers
with a JSON-RPC error): success with structured or text data, a tool's ``isError``, a refusal by
the guard and invalid arguments each become an envelope, and a server's JSON-RPC error keeps its
code end to end (library envelope, and a gateway client over HTTP).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcpmux import Host, ToolResult
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.connection.results import POLICY_REFUSED, ErrorInfo
from mcpmux.errors import MCPTimeoutError, ServerError
from mcpmux.policy import StateStore
from tests.gateway.serving import serve
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

DEADLINE_S = 60
REJECTING = str(Path(__file__).resolve().parents[1] / "fixtures" / "rejecting_server.py")


def peer(name: str, which: str, *args: str) -> StdioServerConfig:
    command, argv = stdio_command(which, *args)
    return StdioServerConfig(name=name, command=command, args=argv)


def rejecting() -> StdioServerConfig:
    return StdioServerConfig(name="rj", command=sys.executable, args=[REJECTING])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


async def test_every_outcome_of_a_call_is_an_envelope(tmp_path: Path, store: StateStore) -> None:
    servers = (peer("ev", "everything"), peer("fs", "filesystem", str(tmp_path)), rejecting())
    config = Config(servers=servers, security=SecurityConfig(pinning="off", denied_tools=("ev:echo",)))
    with anyio.fail_after(DEADLINE_S):
        async with Host(config, store=store, catalog=False) as host:
            structured = await ToolResult.capture(host.call_tool("ev:get-structured-content", {"location": "Chicago"}))
            assert structured.success and structured.error is None
            assert set(structured.data) == {"temperature", "conditions", "humidity"}
            text = await ToolResult.capture(host.call_tool("ev:get-sum", {"a": 2, "b": 3}))
            assert text.success and text.data.endswith("5.")
            assert json.loads(json.dumps(text.to_dict()))["content"][0]["type"] == "text"

            missing = await ToolResult.capture(host.call_tool("fs:read_text_file", {"path": str(tmp_path / "no")}))
            assert not missing.success and missing.is_error
            assert missing.error is not None and missing.error.code is None  # the tool said so; no protocol error
            assert "no" in missing.error.message

            invalid = await ToolResult.capture(host.call_tool("ev:get-sum", {"a": 2}))
            assert invalid.to_dict()["error"] == {
                "code": -32602,
                "message": invalid.error.message if invalid.error else None,
                "data": {"problems": [{"argument": "b", "expected": "a required argument", "given": None}]},
            }
            denied = await ToolResult.capture(host.call_tool("ev:echo", {"message": "x"}))
            assert denied.error is not None and denied.error.code == POLICY_REFUSED

            rejected = await ToolResult.capture(host.call_tool("rj:reject", {"code": -32042, "message": "nope"}))
            assert rejected.to_dict()["error"] == {"code": -32042, "message": "nope", "data": {"fixture": "rejecting"}}
            with pytest.raises(ServerError) as caught:  # and the exception carries the same
                await host.call_tool("rj:reject", {"code": -32042, "message": "nope"})
            assert (caught.value.code, caught.value.data) == (-32042, {"fixture": "rejecting"})


@pytest.mark.slow
async def test_a_servers_json_rpc_error_code_reaches_a_gateway_client(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.json"
    entry = {"name": "rj", "type": "stdio", "command": sys.executable, "args": [REJECTING]}
    path.write_text(json.dumps({"mcp": {"servers": [entry], "security": {"pinning": "off"}}}))
    with serve(tmp_path, path, "--http", "127.0.0.1:0") as serving, anyio.fail_after(DEADLINE_S):
        async with Client(serving.url, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("rj__reject", {"code": -32042, "message": "nope"})
            assert (caught.value.error.code, caught.value.error.message) == (-32042, "nope")
            assert caught.value.error.data == {"fixture": "rejecting"}


def test_error_info_codes_for_local_failures() -> None:
    timeout = ErrorInfo.of(MCPTimeoutError("s", "tools/call", 1.0))
    assert timeout.code == -32001 and "timed out" in timeout.message
    assert ToolResult.failed(MCPTimeoutError("s", "tools/call", 1.0)).to_dict()["success"] is False
