"""``mcpmux run`` and ``mcpmux chat`` reach stdio servers through the daemon when it runs, else start them.

The model side is the scripted OpenAI-compatible endpoint of the chat tests; the server is the
counter (``bump`` answers ``"<count> pid <pid>"``), so each answer says which process served it:
the daemon's warm instance, or a child of the command itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import psutil
import pytest

from tests.daemon.conftest import Daemon, daemon_processes
from tests.daemon.test_daemon_lifecycle import _counter, _write_config
from tests.fixtures.scripted_llm import Call, Reply, ScriptedLLM

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network, pytest.mark.timeout(600)]

WAIT_S = 180.0


def _daemons_counter(daemon: Daemon) -> set[int]:
    """The processes of the daemon's counter instance (its child may be a sandbox wrapper of the server)."""
    root = psutil.Process(daemon.server_pids()["counter"])
    return {root.pid, *(p.pid for p in root.children(recursive=True))}


def _run(daemon: Daemon, cwd: Path, *flags: str) -> tuple[int, str, str, str]:
    """``mcpmux FLAGS run`` in a fresh process with one scripted bump; exit code, stdout, stderr, the tool result."""
    script = [Reply(tool_calls=[Call("counter__bump", {})]), Reply("bumped")]
    env = {k: v for k, v in daemon.env.items() if k != "OPENAI_API_KEY"}
    with ScriptedLLM(script) as llm:
        done = subprocess.run(
            [sys.executable, "-m", "mcpmux", *flags, "run", "--base-url", llm.base_url, "-m", "scripted", "bump it"],
            env=env, cwd=cwd, capture_output=True, text=True, timeout=WAIT_S,
        )  # fmt: skip
    result = str(llm.requests[1]["messages"][-1]["content"]) if len(llm.requests) > 1 else ""
    return done.returncode, done.stdout, done.stderr, result


def test_run_uses_the_daemon_when_it_runs_and_falls_back_when_it_cannot(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    # A daemon that cannot be used (its directory is open to others): the command starts the server itself.
    (daemon.runtime / "mcpmux").mkdir(mode=0o700)
    os.chmod(daemon.runtime / "mcpmux", 0o777)
    code, out, err, result = _run(daemon, tmp_path)
    assert (code, out) == (0, "bumped\n"), err
    assert result.startswith("1 pid "), result
    assert daemon_processes(daemon.runtime) == []
    alone = int(result.split()[-1])
    os.chmod(daemon.runtime / "mcpmux", 0o700)
    daemon.start("--linger", "600")
    for expected in ("1", "2"):  # both runs are served by the daemon's one warm instance
        code, out, err, result = _run(daemon, tmp_path)
        assert (code, out) == (0, "bumped\n"), err
        count, _, pid = result.split()
        assert count == expected, result
        assert int(pid) in _daemons_counter(daemon)
        assert int(pid) != alone
    # --no-daemon forces the old path: a fresh child, the daemon's counter untouched.
    code, out, err, result = _run(daemon, tmp_path, "--no-daemon")
    assert (code, out) == (0, "bumped\n"), err
    assert result.startswith("1 pid ") and int(result.split()[-1]) not in _daemons_counter(daemon)
    assert _run(daemon, tmp_path)[3].startswith("3 pid ")  # the daemon's instance did not see that call


def test_chat_in_a_terminal_calls_through_the_daemon(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path, _counter("counter"))
    daemon.start("--linger", "600")
    assert _run(daemon, tmp_path)[3].startswith("1 pid ")  # the instance of a command that answers sampling
    env = {**daemon.env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "NO_COLOR": "1"}
    env.pop("OPENAI_API_KEY", None)
    script = [Reply(tool_calls=[Call("counter__bump", {})]), Reply("The counter is at two.")]
    with ScriptedLLM(script) as llm:
        child = pexpect.spawn(
            sys.executable, ["-m", "mcpmux", "chat", "--base-url", llm.base_url, "--model", "scripted"],
            cwd=str(tmp_path), env=env, encoding="utf-8", timeout=WAIT_S, dimensions=(40, 160),
        )  # fmt: skip
        try:
            child.expect("you>")
            child.send("bump the counter\r")
            for text in ("counter:bump", "The counter is at two.", "you>"):
                child.expect_exact(text)
            child.sendeof()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    result = str(llm.requests[1]["messages"][-1]["content"])
    count, _, pid = result.split()
    assert count == "2" and int(pid) in _daemons_counter(daemon), result  # the daemon's warm instance answered
