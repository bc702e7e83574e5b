"""Issue 14: through a chained mcpmux the user is asked once, and the answer is honoured.

Two real mcpmux processes: the outer ``mcpmux call`` in a real terminal (pexpect), whose one
server is the inner ``mcpmux serve --stdio`` in front of the real ``mcp-server-time``. The inner
guard requires approval and asks by elicitation; the person answers once, at the outer terminal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pexpect
import pytest

from tests.forkserver import MCPMUX
from tests.gateway.serving import isolated_env
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.peers]

CALL_TIMEOUT_S = 120


def chain(root: Path, *, outer_asks: bool) -> dict[str, str]:
    """An inner config (time, approval required) and an outer one whose server is the inner serve."""
    command, args = stdio_command("time")
    inner = {"servers": [{"name": "time", "type": "stdio", "command": command, "args": args}]}
    inner["security"] = {"pinning": "off", "require_approval": ["time:get_current_time"]}
    (root / "inner.json").write_text(json.dumps({"mcp": inner}), encoding="utf-8")
    serve = [*("--config", str(root / "inner.json")), "serve", "--stdio"]
    state = {"XDG_DATA_HOME": str(root / "inner-data"), "XDG_CACHE_HOME": str(root / "inner-cache")}
    outer_server = {"name": "inner", "type": "stdio", "command": MCPMUX, "args": serve, "env": state}
    outer = {"servers": [outer_server], "security": {"pinning": "off", "require_approval": outer_asks}}
    (root / "outer.json").write_text(json.dumps({"mcp": outer}), encoding="utf-8")
    return isolated_env(root)


@pytest.mark.parametrize("outer_asks", [True, False], ids=["outer-and-inner-ask", "only-inner-asks"])
def test_the_user_is_asked_once_and_yes_is_honoured_end_to_end(tmp_path: Path, outer_asks: bool) -> None:
    env = chain(tmp_path, outer_asks=outer_asks)
    argv = ["--config", str(tmp_path / "outer.json"), "call", "inner:time__get_current_time", '{"timezone": "UTC"}']
    child = pexpect.spawn(MCPMUX, argv, env=env, timeout=CALL_TIMEOUT_S, encoding="utf-8")
    try:
        child.expect("approval needed for inner:time__get_current_time")
        child.expect(r"Allow\? \[y\]es")
        child.sendline("y")
        child.expect(pexpect.EOF)
        transcript = child.before or ""
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, transcript
    assert '"timezone": "UTC"' in transcript and "declined" not in transcript
    assert "Allow?" not in transcript  # no second question, and no form


def test_no_at_the_outer_terminal_is_a_no_at_the_inner_guard(tmp_path: Path) -> None:
    env = chain(tmp_path, outer_asks=False)
    argv = ["--config", str(tmp_path / "outer.json"), "call", "inner:time__get_current_time", '{"timezone": "UTC"}']
    child = pexpect.spawn(MCPMUX, argv, env=env, timeout=CALL_TIMEOUT_S, encoding="utf-8")
    try:
        child.expect(r"Allow\? \[y\]es")
        child.sendline("n")
        child.expect("declined")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1
