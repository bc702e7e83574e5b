"""``mcpmux run PROMPT``: one non-interactive turn against the scripted model and the built-in workspace."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mcpmux.cli.main import run
from tests.chat.processes import alive, kill_and_reap, sleeper_pids, wait_for
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

pytestmark = pytest.mark.network


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "notes.txt").write_text("the answer is 42\n", encoding="utf-8")
    (tmp_path / "mcpmux.yaml").write_text("mcp:\n  servers:\n    - {name: workspace, type: builtin}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


def test_run_streams_the_answer_and_reports_calls_on_stderr(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = [Reply(tool_calls=[Call("workspace__read_file", {"path": "notes.txt"})]), Reply("It says 42.")]
    with ScriptedLLM(script) as llm:
        code = run(["run", "--base-url", llm.base_url, "--model", "scripted", "what is in notes.txt?"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "It says 42.\n"
    assert "-> workspace:read_file" in err
    assert "<- workspace:read_file ok" in err
    assert llm.requests[0]["model"] == "scripted"


def test_run_json_prints_a_transcript(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedLLM([Reply("Hello.")]) as llm:
        code = run(["run", "--base-url", llm.base_url, "-m", "scripted", "--json", "hi"])
    transcript = json.loads(capsys.readouterr().out)
    assert code == 0
    assert transcript["answer"] == "Hello."
    assert transcript["stopped"] == "answered"
    assert transcript["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}
    assert [m["role"] for m in transcript["messages"]] == ["user", "assistant"]


def test_run_exits_1_when_the_model_never_answers(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = [Reply(tool_calls=[Call("workspace__list_directory", {})]) for _ in range(2)]
    with ScriptedLLM(script) as llm:
        code = run(["run", "--base-url", llm.base_url, "-m", "s", "--max-turns", "2", "loop"])
    assert code == 1
    assert "no answer after 2 model turns" in capsys.readouterr().err


def test_run_exits_1_when_the_endpoint_fails(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedLLM([]) as llm:
        code = run(["run", "--base-url", llm.base_url, "-m", "s", "hi"])
    assert code == 1
    assert "Error: openai: InternalServerError" in capsys.readouterr().err


def test_run_without_a_key_or_endpoint_says_how_to_configure_one(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["run", "hi"]) == 2  # a configuration problem, found before any server starts
    err = capsys.readouterr().err
    assert "no API key" in err
    assert "OPENAI_API_KEY" in err


def test_run_with_a_low_tool_threshold_sends_only_search_tools(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [Reply(tool_calls=[Call("search_tools", {"query": "read file"})]), Reply("found")]
    with ScriptedLLM(script) as llm:
        code = run(["run", "--base-url", llm.base_url, "-m", "s", "--tool-threshold", "1", "find a reader"])
    assert code == 0
    first, second = ([t["function"]["name"] for t in r["tools"]] for r in llm.requests)
    assert first == ["search_tools"]
    assert "workspace__read_file" in second
    assert "search_tools" in llm.requests[0]["messages"][0]["content"]
    assert "tokens: 20 in, 10 out" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.subprocess
def test_ctrl_c_stops_run_with_exit_130_and_the_tool_command_ends(workdir: Path) -> None:
    (workdir / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n    - {name: workspace, type: builtin}\n"
        "  security:\n    approval_rules: [{tools: 'workspace:execute_shell', action: allow}]\n"
    )
    script = [Reply(tool_calls=[Call("workspace__execute_shell", {"command": "sleep 30"})])]
    mcpmux = str(Path(sys.executable).parent / "mcpmux")
    with ScriptedLLM(script) as llm:
        child = subprocess.Popen(
            [mcpmux, "run", "--base-url", llm.base_url, "-m", "s", "go"],
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        shells: list[int] = []
        try:
            assert wait_for(lambda: shells.extend(sleeper_pids(child.pid)) or shells), "the shell never started"
            child.send_signal(signal.SIGINT)
            _, err = child.communicate(timeout=20)
        finally:
            kill_and_reap(child)  # only if still running; a failed test leaves no orphan behind
    assert child.returncode == 130, err
    # Its own shell (not any `sleep 30` on the machine): the sandbox's process group is killed on the
    # way out; the kernel may take a moment to reap it.
    assert wait_for(lambda: not alive(shells), timeout_s=10), alive(shells)
