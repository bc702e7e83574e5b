"""A token's scopes hold on every face: a ``read`` token lists but never calls, over MCP too.

One real ``mcpmux serve --http --ws`` (a fixture server behind it, a toolset at ``/mcp/kit``) and
tokens made with ``mcpmux token create --scope``. The table (``mcpmux.web.tokens.grants``):
``read`` lists and reads, ``execute`` calls tools, ``admin`` manages; ``admin`` includes ``execute``,
which includes ``read``. Before, a ``read`` token called tools on ``/mcp``, its toolset paths and the
WebSocket (only ``/api`` and ``/ui`` checked), and an ``admin``-only token was refused reads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from mcpmux.config.models import WebSocketServerConfig
from mcpmux.errors import MCPMuxError
from mcpmux.manager import Manager
from tests.gateway.serving import mcpmux, serve
from tests.gateway.test_toolsets_served import client_at

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess, pytest.mark.network, pytest.mark.xdist_group(__name__)]

TINY = Path(__file__).parents[1] / "fixtures" / "tiny_server.py"
WAIT_S = 60
REFUSED = "lacks the scope 'execute'"


def config(root: Path) -> Path:
    path = root / "mcpmux.json"
    server = {"name": "tiny", "type": "stdio", "command": sys.executable, "args": ["-S", "-E", str(TINY)]}
    tree = {"mcp": {"servers": [server], "security": {"pinning": "off"}}, "toolsets": {"kit": {"tools": ["tiny:*"]}}}
    path.write_text(json.dumps(tree))
    return path


def token(root: Path, path: Path, name: str, *scopes: str) -> str:
    flags = [arg for scope in scopes for arg in ("--scope", scope)]
    made = mcpmux(root, path, "token", "create", name, *flags, "--json")
    assert made.returncode == 0, made.stderr
    value: str = json.loads(made.stdout)["token"]
    return value


async def http_call(url: str, secret: str) -> str:
    """What a client holding ``secret`` gets for listing, then calling ``tiny__echo``, at ``url``."""
    with anyio.fail_after(WAIT_S):
        async with client_at(url, secret) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "tiny__echo" in names
            try:
                result = await client.call_tool("tiny__echo", {"text": "called"})
            except MCPError as exc:
                return exc.error.message
            return "".join(getattr(b, "text", "") for b in result.content)


async def ws_call(url: str, secret: str) -> str:
    upstream = WebSocketServerConfig(name="gw", url=url, headers={"Authorization": f"Bearer {secret}"})
    with anyio.fail_after(WAIT_S):
        async with Manager([upstream], catalog=False) as manager:
            assert "gw:tiny__echo" in {t.name for t in manager.tools()}
            try:
                result = await manager.call_tool("gw:tiny__echo", {"text": "called"})
            except MCPMuxError as exc:
                return str(exc)
            return "".join(getattr(b, "text", "") for b in result.content)


async def test_scopes_rule_mcp_websocket_toolset_paths_and_the_api_alike(tmp_path: Path) -> None:
    path = config(tmp_path)
    reader, runner, boss = (
        token(tmp_path, path, "reader", "read"),
        token(tmp_path, path, "runner", "read", "execute"),
        token(tmp_path, path, "boss", "admin"),
    )
    with serve(tmp_path, path, "--http", "127.0.0.1:0", "--ws", "127.0.0.1:0") as serving:
        for url in (serving.url, serving.url + "/kit"):
            assert REFUSED in await http_call(url, reader), url
            assert await http_call(url, runner) == "called"
            assert await http_call(url, boss) == "called"  # admin includes execute
        ws = serving.addresses["ws"]
        assert REFUSED in await ws_call(ws, reader)
        assert await ws_call(ws, runner) == "called"
        execute = {"tool_id": "tiny:echo", "arguments": {"text": "called"}}
        as_boss = {"Authorization": f"Bearer {boss}"}
        assert httpx2.get(serving.base + "/api/sources", headers=as_boss, timeout=30).status_code == 200  # read
        answer = httpx2.post(serving.base + "/api/tools/execute", json=execute, headers=as_boss, timeout=60)
        assert answer.status_code == 200 and answer.json()["success"], answer.text
        as_reader = {"Authorization": f"Bearer {reader}"}
        answer = httpx2.post(serving.base + "/api/tools/execute", json=execute, headers=as_reader, timeout=60)
        assert answer.status_code == 403
    audit = json.loads(mcpmux(tmp_path, path, "--json", "audit", "--limit", "50").stdout)
    assert not [row for row in audit if row["caller"] and "reader" in row["caller"]], audit  # never reached the guard
