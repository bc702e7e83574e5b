"""``mcpmux chat`` with server-everything: a sampling request approved inline, an elicitation form."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pexpect
import pytest

from tests.fixtures.scripted_llm import Reply, ScriptedLLM
from tests.forkserver import MCPMUX
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network, pytest.mark.peers]


def spawn(workdir: Path, base_url: str) -> pexpect.spawn:
    command, args = stdio_command("everything")
    server = {"name": "ev", "type": "stdio", "command": command, "args": args}
    (workdir / "mcpmux.yaml").write_text(json.dumps({"mcp": {"servers": [server]}}), encoding="utf-8")
    env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1")
    child = pexpect.spawn(
        MCPMUX,
        ["chat", "--base-url", base_url, "-m", "scripted"],
        cwd=str(workdir),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 160),
    )
    child.expect("you>")
    return child


def test_sampling_is_shown_and_approved_and_elicitation_is_a_form(tmp_path: Path) -> None:
    with ScriptedLLM([Reply("Roses are red")]) as llm:
        child = spawn(tmp_path, llm.base_url)
        try:
            child.send('/call ev:trigger-sampling-request {"prompt": "Write a poem", "maxTokens": 20}\r')
            child.expect_exact("sampling request")
            child.expect_exact("Write a poem")
            child.expect_exact("Let the model answer?")
            child.send("y\r")
            child.expect_exact("Roses are red")
            child.expect("you>")
            child.send("/call ev:trigger-elicitation-request {}\r")
            child.expect_exact("ev asks")
            child.expect_exact("Answer?")
            child.send("n\r")
            child.expect_exact("decline")
            child.expect("you>")
        finally:
            child.close(force=True)
    assert llm.requests[0]["messages"][-1]["content"].endswith("Write a poem")
