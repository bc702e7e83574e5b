"""VS Code's ``envFile``: its variables reach the server's env instead of being dropped silently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpmux.config import StdioServerConfig, load_file
from mcpmux.config.hosts import read_servers
from mcpmux.errors import ConfigError

ENV_FILE = """\
# comment
export REGION=eu-west-1
QUOTED="a b\\nc"
SINGLE='x # not a comment'
PLAIN=value # trailing comment
OVERRIDDEN=from-file
"""


def vscode_project(tmp_path: Path, env_file: str, env: dict[str, str] | None = None) -> Path:
    folder = tmp_path / ".vscode"
    folder.mkdir()
    server = {"type": "stdio", "command": "npx", "args": ["x"], "envFile": env_file, "env": env or {}}
    path = folder / "mcp.json"
    path.write_text(json.dumps({"servers": {"api": server}}), encoding="utf-8")
    return path


def test_env_file_variables_join_the_env_and_explicit_env_wins(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(ENV_FILE, encoding="utf-8")
    path = vscode_project(tmp_path, "${workspaceFolder}/.env", {"OVERRIDDEN": "explicit"})
    server = load_file(path, environ={}).server("api")
    assert isinstance(server, StdioServerConfig)
    env = {k: v.get_secret_value() for k, v in server.env.items()}
    assert env == {
        "REGION": "eu-west-1",
        "QUOTED": "a b\nc",
        "SINGLE": "x # not a comment",
        "PLAIN": "value",
        "OVERRIDDEN": "explicit",
    }


def test_a_relative_env_file_is_relative_to_the_workspace_folder_and_imports(tmp_path: Path) -> None:
    (tmp_path / "api.env").write_text("REGION=eu\n", encoding="utf-8")
    servers, _ = read_servers(vscode_project(tmp_path, "api.env"))
    assert servers[0]["env"] == {"REGION": "eu"}


def test_a_missing_env_file_is_a_problem_naming_the_field(tmp_path: Path) -> None:
    path = vscode_project(tmp_path, "${workspaceFolder}/missing.env")
    with pytest.raises(ConfigError) as caught:
        load_file(path, environ={})
    assert caught.value.problems[0].path == "servers.api.envFile" and "does not exist" in str(caught.value)


def test_a_malformed_line_is_reported_with_its_number_and_not_its_content(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("GOOD=1\nthis is s3cret garbage\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_file(vscode_project(tmp_path, ".env"), environ={})
    assert ":2: expected KEY=VALUE" in str(caught.value) and "s3cret" not in str(caught.value)
