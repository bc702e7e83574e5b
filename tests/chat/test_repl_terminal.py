"""``mcpmux chat`` driven in a real terminal (pexpect): slash commands, approval, a model turn, Ctrl-C."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from mcpmux.bridge.loop import CANCELLED_RESULT
from tests.chat.processes import sleepers, wait_for
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

pytestmark = [pytest.mark.subprocess, pytest.mark.network]

CONSOLE_SCRIPT = str(Path(sys.executable).parent / "mcpmux")  # a terminal, Ctrl-C: the real process
PROMPT = "you>"
CONFIG = """\
mcp:
  servers:
    - name: workspace
      type: builtin
  security:
    require_approval: ["workspace:write_file"]
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    (tmp_path / "mcpmux.yaml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def spawn(workdir: Path, *args: str) -> pexpect.spawn:
    env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    child = pexpect.spawn(
        CONSOLE_SCRIPT, ["chat", *args], cwd=str(workdir), env=env, encoding="utf-8", timeout=20, dimensions=(40, 160)
    )
    child.expect(PROMPT)
    return child


@pytest.fixture
def chat(workdir: Path) -> Iterator[pexpect.spawn]:
    child = spawn(workdir)
    yield child
    child.close(force=True)


def command(child: pexpect.spawn, line: str, *expected: str) -> None:
    child.send(line + "\r")
    for text in expected:
        child.expect_exact(text)
    child.expect(PROMPT)


@pytest.mark.slow
def test_slash_commands_work_without_a_model(chat: pexpect.spawn, workdir: Path) -> None:
    command(chat, "/help", "List the slash commands", "/mcp tools [server]", "/save FILE")
    command(chat, "/mcp", "workspace", "connected")
    command(chat, "/mcp tools workspace", "workspace:read_file")
    command(chat, '/call workspace:read_file {"path": "notes.txt"}', "the answer is 42")
    command(chat, "hello", "no model configured")
    command(chat, f"/save {workdir / 'chat.json'}", "saved")
    chat.send("/exit\r")
    chat.expect(pexpect.EOF)
    assert '"the answer is 42' in (workdir / "chat.json").read_text(encoding="utf-8")
    history = Path(os.environ["MCPMUX_STATE_DIR"]) / "chat_history"
    assert "/mcp tools workspace" in history.read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_call_that_needs_approval_is_asked_inline(chat: pexpect.spawn, workdir: Path) -> None:
    chat.send('/call workspace:write_file {"path": "out.txt", "content": "hi"}\r')
    chat.expect_exact("approval needed")
    chat.expect_exact("Allow?")
    chat.send("y\r")
    chat.expect_exact("created out.txt")
    chat.expect(PROMPT)
    chat.send('/call workspace:write_file {"path": "no.txt", "content": "no"}\r')
    chat.expect_exact("Allow?")
    chat.send("n\r")
    chat.expect_exact("declined")
    chat.expect(PROMPT)
    assert (workdir / "out.txt").read_text(encoding="utf-8") == "hi"
    assert not (workdir / "no.txt").exists()


@pytest.mark.slow
def test_a_model_turn_shows_tool_calls_and_the_answer(workdir: Path) -> None:
    script = [Reply(tool_calls=[Call("workspace__read_file", {"path": "notes.txt"})]), Reply("The answer is **42**.")]
    with ScriptedLLM(script) as llm:
        child = spawn(workdir, "--base-url", llm.base_url, "--model", "scripted")
        try:
            command(
                child, "what is in notes.txt?", "workspace:read_file", "the answer is 42", "The answer is", "tokens:"
            )
        finally:
            child.close(force=True)
    assert llm.requests[1]["messages"][-1]["content"].startswith("the answer is 42")


@pytest.mark.slow
def test_ctrl_c_interrupts_a_tool_call_and_the_chat_goes_on(workdir: Path) -> None:
    script = [Reply(tool_calls=[Call("workspace__execute_shell", {"command": "sleep 30"})]), Reply("after")]
    with ScriptedLLM(script) as llm:
        child = spawn(workdir, "--base-url", llm.base_url, "--model", "scripted")
        try:
            child.send("run something slow\r")
            child.expect_exact("Allow?")
            child.send("y\r")
            assert wait_for(lambda: sleepers(child.pid)), "the shell command never started"
            child.sendintr()
            child.expect_exact("interrupted")
            child.expect(PROMPT)
            # The cancellation reached the server: it stopped the command it was running.
            assert wait_for(lambda: not sleepers(child.pid)), "the shell command survived Ctrl-C"
            command(child, "and now?", "after")
        finally:
            child.close(force=True)
    tool_message = llm.requests[1]["messages"][-2]
    assert (tool_message["role"], tool_message["content"]) == ("tool", CANCELLED_RESULT)


def test_a_named_model_that_cannot_work_fails_before_any_server_starts(workdir: Path) -> None:
    (workdir / "mcpmux.yaml").write_text(
        f"mcp:\n  servers:\n    - name: marker\n      type: stdio\n      command: {sys.executable}\n"
        f"      args: ['-c', 'open(\"started\", \"w\").close()']\n",
        encoding="utf-8",
    )
    env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    child = pexpect.spawn(
        CONSOLE_SCRIPT, ["chat", "--model", "gpt-x"], cwd=str(workdir), env=env, encoding="utf-8", timeout=60
    )
    child.expect_exact("Error:")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2, child.before
    assert "connecting to servers" not in (child.before or "")
    assert not (workdir / "started").exists(), "a server was started before the model settings were checked"
