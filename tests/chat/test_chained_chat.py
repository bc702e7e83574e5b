"""Issue 14: ``chat`` over a chained mcpmux asks once for one call (it asked three times).

The chat (a real terminal, pexpect) has one server: the inner ``mcpmux serve --stdio`` with the
built-in workspace, whose guard requires approval of ``write_file``; the chat's own guard requires it too.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pexpect
import pytest

from tests.forkserver import MCPMUX

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

PROMPT = "you>"


def test_one_call_through_a_chained_mcpmux_is_asked_once(tmp_path: Path) -> None:
    inner = {"servers": [{"name": "workspace", "type": "builtin", "root": str(tmp_path)}]}
    inner["security"] = {"require_approval": ["workspace:write_file"]}
    (tmp_path / "inner.json").write_text(json.dumps({"mcp": inner}), encoding="utf-8")
    serve = ["--config", str(tmp_path / "inner.json"), "serve", "--stdio"]
    state = {"XDG_DATA_HOME": str(tmp_path / "inner-data"), "XDG_CACHE_HOME": str(tmp_path / "inner-cache")}
    outer = {"servers": [{"name": "inner", "type": "stdio", "command": MCPMUX, "args": serve, "env": state}]}
    outer["security"] = {"require_approval": True}
    (tmp_path / "mcpmux.json").write_text(json.dumps({"mcp": outer}), encoding="utf-8")
    env = dict(os.environ, TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", NO_COLOR="1")
    env.pop("OPENAI_API_KEY", None)
    child = pexpect.spawn(
        MCPMUX, ["--config", str(tmp_path / "mcpmux.json"), "chat"], cwd=str(tmp_path), env=env,
        encoding="utf-8", timeout=90, dimensions=(40, 160),
    )  # fmt: skip
    screen = io.StringIO()
    child.logfile_read = screen
    try:
        child.expect(PROMPT)
        child.send('/call inner:workspace__write_file {"path": "out.txt", "content": "hi"}\r')
        child.expect_exact("approval needed")
        child.expect_exact("Allow?")
        child.send("y\r")
        index = child.expect_exact(["created out.txt", "approval needed", "Answer?", "declined"])
        assert index == 0, f"asked again or refused: {child.before!r}"
        child.expect(PROMPT)
    finally:
        child.close(force=True)
    assert screen.getvalue().count("approval needed") == 1
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "hi"
