"""``mcpmux add workspace --builtin``: one line adds a built-in server beside the servers of any file.

The installed script, as a real process: the entry lands in the user's file (comments kept), the
built-in then serves calls next to the file's other servers; misuse is a usage error (exit 2).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.forkserver import MCPMUX

pytestmark = pytest.mark.subprocess

PROJECT = """\
# my servers
mcp:
  servers:
    - name: other   # stays
      type: stdio
      command: not-installed-anywhere-mcp
      enabled: false
"""


def mcpmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPMUX, *args], capture_output=True, text=True, env=os.environ, timeout=60, stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    path = tmp_path / "mcpmux.yaml"
    path.write_text(PROJECT, encoding="utf-8")
    return path


@pytest.mark.slow
def test_add_builtin_writes_one_entry_and_the_builtin_serves_calls(project: Path) -> None:
    added = mcpmux("add", "workspace", "--builtin")
    assert added.returncode == 0, added.stderr
    text = project.read_text()
    assert text.startswith(PROJECT)  # the user's file, comments and all, then the new entry
    assert "name: workspace" in text and "type: builtin" in text

    called = mcpmux("call", "workspace:read_file", "path=notes.txt")
    assert called.returncode == 0, called.stderr
    assert "the answer is 42" in called.stdout

    docs = mcpmux("add", "docs", "--builtin", "content_store", "--root", str(project.parent), "--json")
    assert docs.returncode == 0, docs.stderr
    assert json.loads(docs.stdout)["entry"] == {
        "name": "docs", "type": "builtin", "builtin": "content_store", "root": str(project.parent),
    }  # fmt: skip
    listed = mcpmux("tools", "docs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any(t["name"].startswith("docs:") for t in json.loads(listed.stdout))


def test_add_builtin_refuses_what_it_cannot_write(project: Path) -> None:
    unknown = mcpmux("add", "shell", "--builtin")
    assert unknown.returncode == 2
    assert "no built-in server 'shell'" in unknown.stderr
    mixed = mcpmux("add", "workspace", "--builtin", "--", "npx", "server")
    assert mixed.returncode == 2
    assert "--builtin takes a NAME" in mixed.stderr
    assert project.read_text() == PROJECT
