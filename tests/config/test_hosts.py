"""Other hosts' files: locations per platform, and servers out and back in unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpmux.config.hosts import HOSTS, export_servers, host_files, merge_into, read_servers
from mcpmux.errors import ConfigError

SERVERS: list[dict[str, Any]] = [
    {
        "name": "github",
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-github"],
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG_LEVEL": "info"},
    },
    {
        "name": "remote",
        "type": "http",
        "url": "https://example.com/mcp",
        "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
    },
    {"name": "legacy", "type": "sse", "url": "https://example.com/sse", "enabled": False},
]


def test_user_files_follow_the_platform(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    monkeypatch.setenv("APPDATA", str(isolated_home / "Roaming"))
    linux = host_files("claude-desktop", platform="linux")["user"]
    mac = host_files("claude-desktop", platform="darwin")["user"]
    windows = host_files("claude-desktop", platform="win32")["user"]
    assert linux == isolated_home / ".config" / "Claude" / "claude_desktop_config.json"
    assert mac == isolated_home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    assert windows == isolated_home / "Roaming" / "Claude" / "claude_desktop_config.json"
    assert host_files("vscode", platform="darwin")["user"].parts[-4:] == (
        "Application Support",
        "Code",
        "User",
        "mcp.json",
    )


def test_project_files_are_relative_to_the_directory(tmp_path: Path, isolated_home: Path) -> None:
    assert host_files("claude-code", cwd=tmp_path) == {
        "project": tmp_path / ".mcp.json",
        "user": isolated_home / ".claude.json",
    }
    assert host_files("cursor", cwd=tmp_path)["project"] == tmp_path / ".cursor" / "mcp.json"
    assert host_files("vscode", cwd=tmp_path)["project"] == tmp_path / ".vscode" / "mcp.json"
    with pytest.raises(ConfigError, match="unknown host"):
        host_files("emacs")


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_export_then_import_gives_the_same_servers(tmp_path: Path, host: str) -> None:
    exported, skipped = export_servers(SERVERS, host)
    assert skipped == []
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(exported), encoding="utf-8")
    imported, _ = read_servers(path)
    # `enabled: false` goes out as `disabled: true` and comes back; references stay references.
    assert imported == SERVERS


@pytest.mark.parametrize(("host", "spelling"), [("cursor", "${env:GITHUB_TOKEN}"), ("vscode", "${env:GITHUB_TOKEN}")])
def test_references_use_the_hosts_spelling(host: str, spelling: str) -> None:
    exported, _ = export_servers(SERVERS, host)
    key = HOSTS[host].servers_key
    assert exported[key]["github"]["env"]["GITHUB_TOKEN"] == spelling
    assert exported[key]["remote"]["headers"]["Authorization"] == "Bearer ${env:REMOTE_TOKEN}"


def test_claude_code_keeps_references_as_they_are() -> None:
    exported, _ = export_servers(SERVERS, "claude-code")
    assert exported["mcpServers"]["github"] == {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-github"],
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG_LEVEL": "info"},
    }
    assert exported["mcpServers"]["legacy"]["disabled"] is True


def test_builtins_become_mcpmux_builtin_and_raw_sockets_are_skipped() -> None:
    servers = [
        {"name": "workspace", "type": "builtin"},
        {"name": "raw", "type": "tcp", "url": "tcp://127.0.0.1:9"},
    ]
    exported, skipped = export_servers(servers, "cursor")
    assert exported == {"mcpServers": {"workspace": {"command": "mcpmux", "args": ["builtin", "workspace"]}}}
    assert skipped == ["raw: type 'tcp' is not supported by cursor"]


def test_vscode_input_and_env_references_import_as_references(tmp_path: Path) -> None:
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(
        '{"inputs": [{"id": "key", "type": "promptString"}], // a comment\n'
        '"servers": {"s": {"command": "x", "env": {"A": "${env:A_VAR}", "B": "${input:key}"}}}}',
        encoding="utf-8",
    )
    servers, warnings = read_servers(path)
    assert servers[0]["env"] == {"A": "${A_VAR}", "B": "${input:key}"}
    assert warnings == []


def test_merge_keeps_the_other_servers_and_keys_of_the_host_file() -> None:
    existing = {"numStartups": 3, "mcpServers": {"mine": {"command": "a"}, "github": {"command": "old"}}}
    merged = merge_into(existing, {"mcpServers": {"github": {"command": "npx"}}})
    assert merged == {"numStartups": 3, "mcpServers": {"mine": {"command": "a"}, "github": {"command": "npx"}}}
