"""``mcpmux record`` captures a real session (server-everything) through the gateway; replay answers the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcpmux.errors import ServerError, UsageError
from mcpmux.testing import MockServer
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess]

DEADLINE_S = 120
SECRET = "sk-live-0123456789abcdef"
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "hello from the recording"}),
    ("get-sum", {"a": 2, "b": 40}),
]


async def _drive(session: ClientSession, prefix: str) -> dict[str, Any]:
    """The answers a client gets from ``session``: tools, two calls, a resource, a prompt.

    ``prefix`` is how the gateway names the server's tools (``everything__``); a replay uses its own names.
    """
    tools = await session.list_tools()
    answers: dict[str, Any] = {"tools": sorted(t.name.removeprefix(prefix) for t in tools.tools)}
    for tool, arguments in CALLS:
        result = await session.call_tool(f"{prefix}{tool}", arguments)
        answers[tool] = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
    resources = await session.list_resources()
    first = resources.resources[0]
    read = await session.read_resource(first.uri)
    answers["resource"] = [c.model_dump(mode="json", exclude_none=True) for c in read.contents]
    prompt = await session.get_prompt(f"{prefix}simple-prompt", {})
    answers["prompt"] = [m.model_dump(mode="json", exclude_none=True) for m in prompt.messages]
    return answers


async def test_a_recorded_server_everything_session_replays_the_same_with_the_server_stopped(tmp_path: Path) -> None:
    command, args = stdio_command("everything")
    config = tmp_path / "mcpmux.yaml"
    server = {"name": "everything", "type": "stdio", "command": command, "args": args, "env": {"API_KEY": SECRET}}
    config.write_text(json.dumps({"mcp": {"servers": [server], "security": {"require_approval": False}}}))
    session_file = tmp_path / "session.jsonl"
    recorder = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcpmux", "--config", str(config), "record", "everything", "-o", str(session_file)],
        cwd=str(tmp_path),
    )
    with anyio.fail_after(DEADLINE_S):
        async with stdio_client(recorder) as (read, write), ClientSession(read, write) as live:
            await live.initialize()
            real = await _drive(live, "everything__")
    # The recording process has exited with the session (stdio_client reaps it); the server is gone.
    text = session_file.read_text()
    assert SECRET not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["server"] == "everything"
    assert {"tools/list", "tools/call", "resources/read", "prompts/get"} <= {line.get("method") for line in lines}

    mock = MockServer.replay(session_file)
    with anyio.fail_after(DEADLINE_S):
        async with (
            mock.serve("memory") as served,
            served.sdk_transport() as (read, write),
            ClientSession(read, write) as replayed,
        ):
            await replayed.initialize()
            assert await _drive(replayed, "") == real
    assert [(c.tool, c.arguments) for c in mock.calls] == CALLS


async def test_strict_replay_refuses_other_arguments_and_lenient_replay_answers_them(tmp_path: Path) -> None:
    session_file = tmp_path / "session.jsonl"
    result = types.CallToolResult(content=[types.TextContent(text="sum is 42")]).model_dump(mode="json", by_alias=True)
    tool = {"name": "get-sum", "inputSchema": {"type": "object"}}
    session_file.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {"type": "session", "server": "everything"},
                {"type": "exchange", "method": "tools/list", "params": {}, "result": {"tools": [tool]}},
                {
                    "type": "exchange",
                    "method": "tools/call",
                    "params": {"name": "get-sum", "arguments": {"a": 2, "b": 40}},
                    "result": result,
                },
            ]
        )
    )
    for match, expected in (("strict", None), ("lenient", "sum is 42")):
        mock = MockServer.replay(session_file, match=match)  # type: ignore[arg-type]
        with anyio.fail_after(DEADLINE_S):
            async with mock.serve("memory") as served, served.connection() as conn:
                assert (await conn.call_tool("get-sum", {"a": 2, "b": 40})).content[0].text == "sum is 42"  # type: ignore[union-attr]
                if expected is None:
                    with pytest.raises(ServerError, match="no recorded answer for tools/call get-sum"):
                        await conn.call_tool("get-sum", {"a": 1, "b": 1})
                else:
                    assert (await conn.call_tool("get-sum", {"a": 1, "b": 40})).content[0].text == expected  # type: ignore[union-attr]


def test_a_file_that_is_not_a_recording_is_refused_with_a_hint(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"type": "exchange", "method": "ping"}\n')
    with pytest.raises(UsageError, match="not a recording") as refused:
        MockServer.replay(bad)
    assert "mcpmux record" in (refused.value.hint or "")


def test_recording_a_server_that_is_not_configured_names_the_closest(tmp_path: Path) -> None:
    config = tmp_path / "mcpmux.yaml"
    config.write_text(json.dumps({"mcp": {"servers": [{"name": "everything", "command": "true"}]}}))
    output = tmp_path / "s.jsonl"
    command = [sys.executable, "-m", "mcpmux", "--config", str(config), "record", "everythin", "-o", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "everything" in done.stderr
    assert not output.exists()
