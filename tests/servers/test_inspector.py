"""A third-party client, the MCP Inspector CLI (npm, Node 22), lists and calls the built-in servers on stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers.fixtures import inspector_cli

pytestmark = [pytest.mark.peers, pytest.mark.subprocess]


def _inspector(home: Path, server_argv: list[str], *method: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [*inspector_cli(), *server_argv, *method],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stdout, proc.stderr


def _server(kind: str, root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mcpmux.servers", kind, "--root", str(root), *extra]


def test_inspector_lists_portable_workspace_tools_and_calls_one(root: Path, tmp_path: Path) -> None:
    code, out, err = _inspector(tmp_path, _server("workspace", root), "--method", "tools/list", "--strict")
    assert code == 0, err
    tools = {t["name"]: t for t in json.loads(out)["tools"]}
    assert tools["delete"]["annotations"]["destructiveHint"] is True
    assert tools["read_file"]["annotations"]["readOnlyHint"] is True
    code, out, err = _inspector(
        tmp_path,
        _server("workspace", root),
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "path=notes.txt",
    )
    assert code == 0, err
    assert json.loads(out)["content"][0]["text"].startswith("alpha")


def test_inspector_sees_a_traversal_refused_as_a_tool_error(root: Path, tmp_path: Path) -> None:
    _code, out, err = _inspector(
        tmp_path,
        _server("workspace", root),
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "path=../secret.txt",
    )
    assert "outside the workspace root" in out + err
    assert "top secret" not in out


@pytest.mark.slow
def test_inspector_adds_and_searches_content(root: Path, tmp_path: Path) -> None:
    server = _server("content_store", root, "--database", str(tmp_path / "cs.db"))
    code, out, err = _inspector(
        tmp_path,
        server,
        "--method",
        "tools/call",
        "--tool-name",
        "add_content",
        "--tool-arg",
        "store=s",
        "--tool-arg",
        "path=notes.txt",
    )
    assert code == 0, err
    code, out, err = _inspector(
        tmp_path, server, "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=gamma"
    )
    assert code == 0, err
    assert "**gamma**" in json.loads(out)["content"][0]["text"]
    code, out, err = _inspector(
        tmp_path, server, "--method", "resources/read", "--uri", "builtin://content_store/status"
    )
    assert code == 0, err
    assert "`s`" in out
