"""The built-in servers on stdio (``python -m mcpmux.servers``), as a child process: clean stdout, working tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.servers._client import text_of

pytestmark = [pytest.mark.subprocess]


@pytest.mark.anyio
async def test_workspace_on_stdio_lists_and_calls_tools(root: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpmux.servers", "workspace", "--root", str(root)], env=dict(os.environ)
    )
    with (tmp_path / "stderr.log").open("w", encoding="utf-8") as errlog, anyio.fail_after(30):
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"read_file", "grep", "execute_shell"} <= names
            # A child command's output must not leak onto the MCP stdout.
            result = await session.call_tool("execute_shell", {"command": "echo hello; echo oops >&2"})
            assert "--- stdout ---\nhello" in text_of(result)


@pytest.mark.anyio
async def test_content_store_on_stdio_persists_to_the_given_database(root: Path, tmp_path: Path) -> None:
    database = tmp_path / "cs.db"
    args = ["-m", "mcpmux.servers", "content-store", "--root", str(root), "--database", str(database)]
    params = StdioServerParameters(command=sys.executable, args=args, env=dict(os.environ))
    for step in ("add", "search"):
        with (tmp_path / "stderr.log").open("w", encoding="utf-8") as errlog, anyio.fail_after(30):
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                if step == "add":
                    await session.call_tool("add_content", {"store": "s", "path": "notes.txt"})
                else:
                    found = await session.call_tool("search", {"query": "gamma"})
                    assert '"notes.txt"' in text_of(found)
    assert database.is_file()


def test_stdout_carries_only_json_rpc_lines(root: Path) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    proc = subprocess.run(
        [sys.executable, "-m", "mcpmux.servers", "workspace", "--root", str(root), "-v"],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, proc.stderr
    assert [json.loads(line)["id"] for line in lines] == [1]
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_root_exits_with_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcpmux.servers", "workspace", "--root", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "not a directory" in proc.stderr
