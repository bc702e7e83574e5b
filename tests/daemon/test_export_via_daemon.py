"""``mcpmux export --via-daemon``: host entries that attach to the daemon instead of spawning the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon.conftest import cli

CONFIG = {
    "mcp": {
        "servers": [
            {"name": "files", "command": "npx", "args": ["-y", "pkg"], "env": {"TOKEN": "${FILES_TOKEN}"}},
            {"name": "once", "command": "uvx", "args": ["tool"], "share": "per-call"},
            {"name": "remote", "type": "http", "url": "https://example.com/mcp"},
        ]
    }
}


def test_shared_stdio_servers_become_connect_entries_without_their_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(json.dumps(CONFIG), encoding="utf-8")
    code, out, err = cli("export", "--to", "claude-code", "--via-daemon")
    assert code == 0, err
    servers = json.loads(out)["mcpServers"]
    files = servers["files"]
    assert files["args"][-4:] == ["--config", str(tmp_path / "mcpmux.yaml"), "connect", "files"]
    assert Path(files["command"]).is_absolute()
    assert "env" not in files and "FILES_TOKEN" not in out
    assert servers["once"]["command"] == "uvx"  # per-call: never through the daemon
    assert servers["remote"]["url"] == "https://example.com/mcp"


def test_without_the_flag_export_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(json.dumps(CONFIG), encoding="utf-8")
    code, out, _ = cli("export", "--to", "claude-code")
    assert code == 0
    assert json.loads(out)["mcpServers"]["files"]["command"] == "npx"
