"""Argument validation through the faces: ``mcpmux call``, the gateway over HTTP, and the chat loop.

Each against server-filesystem (and server-everything), as real child processes: invalid
arguments are refused before anything is sent, with an error that names the argument; the CLI
exits 2 (a usage error) and ``--no-validate`` sends them anyway; an HTTP client gets a tool error
result it can read; the scripted model gets the error as its tool result and retries.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcpmux.cli.main import run
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM
from tests.gateway.serving import mcpmux, serve
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.peers, pytest.mark.subprocess]


def write_config(root: Path, *, validate: bool = True) -> Path:
    fs_command, fs_args = stdio_command("filesystem", str(root))
    ev_command, ev_args = stdio_command("everything")
    servers = [
        {"name": "fs", "type": "stdio", "command": fs_command, "args": fs_args, "validate": validate},
        {"name": "ev", "type": "stdio", "command": ev_command, "args": ev_args},
    ]
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": servers, "security": {"pinning": "off"}}}))
    return path


def test_call_refuses_invalid_arguments_with_exit_2_and_no_validate_sends_them(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    refused = mcpmux(tmp_path, config, "call", "fs:read_text_file", '{"path": 42}', timeout_s=60)
    assert refused.returncode == 2, refused.stderr
    assert "argument 'path': expected type 'string', got 42" in refused.stderr
    assert "--no-validate" in refused.stderr  # the hint

    sent = mcpmux(tmp_path, config, "call", "fs:read_text_file", '{"path": 42}', "--no-validate", timeout_s=60)
    assert sent.returncode == 1, sent.stderr  # the server's own refusal: a tool error
    assert "reported an error" in sent.stderr

    audit = mcpmux(tmp_path, config, "audit", "--json", timeout_s=60)
    rows = json.loads(audit.stdout)
    assert [(r["tool"], r["decision"], r["outcome"]) for r in rows][-2:] in (
        [("read_text_file", "invalid", "refused"), ("read_text_file", "allowed", "tool-error")],
        [("read_text_file", "allowed", "tool-error"), ("read_text_file", "invalid", "refused")],
    )


def test_validate_false_in_the_config_turns_the_check_off_for_that_server(tmp_path: Path) -> None:
    config = write_config(tmp_path, validate=False)
    sent = mcpmux(tmp_path, config, "call", "fs:read_text_file", '{"path": 42}', timeout_s=60)
    assert sent.returncode == 1, sent.stderr
    assert "expected type" not in sent.stderr
    checked = mcpmux(tmp_path, config, "call", "ev:get-sum", '{"a": 1, "b": "x"}', timeout_s=60)
    assert checked.returncode == 2 and "argument 'b': expected type 'number'" in checked.stderr


@pytest.mark.anyio
@pytest.mark.network
async def test_an_http_client_of_the_gateway_gets_a_tool_error_naming_the_argument(tmp_path: Path) -> None:
    with serve(tmp_path, write_config(tmp_path), "--http", "127.0.0.1:0") as serving, anyio.fail_after(60):
        async with Client(serving.url, mode="legacy") as client:
            result = await client.call_tool("fs__read_text_file", {"path": 42})
            assert result.is_error
            text = "".join(b.text for b in result.content if isinstance(b, types.TextContent))
            assert "argument 'path': expected type 'string', got 42" in text
            ok = await client.call_tool("ev__get-sum", {"a": 2, "b": 3})
            assert not ok.is_error


@pytest.mark.network
def test_the_model_gets_the_error_as_its_tool_result_and_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    write_config(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    script = [
        Reply(tool_calls=[Call("fs__read_text_file", {"file": "notes.txt"})]),
        Reply(tool_calls=[Call("fs__read_text_file", {"path": str(tmp_path / "notes.txt")})]),
        Reply("It says 42."),
    ]
    with ScriptedLLM(script) as llm:
        code = run(["--config", str(tmp_path / "mcpmux.json"), "run", "--base-url", llm.base_url, "-m", "s", "read"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == "It says 42.\n"
    first, second = (m for m in llm.requests[2]["messages"] if m["role"] == "tool")
    assert first["content"].startswith("[tool error] InvalidArguments: invalid arguments for tool 'read_text_file'")
    assert "argument 'path': expected a required argument, got nothing" in first["content"]
    assert "the answer is 42" in second["content"]
