"""``mcpmux add/add-json/remove/enable/disable/rename/import/export`` in process (click's CliRunner)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpmux.cli.main import run
from mcpmux.config.loader import load_file
from mcpmux.config.paths import user_config_file

PROJECT = """\
# my servers
mcp:
  servers:
    - name: alpha        # the first one
      command: alpha-server
  # settings follow
  settings: {timeout_ms: 1000}
"""


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run the CLI through its error boundary (exit codes as a shell sees them)."""
    with CliRunner().isolation(input=stdin) as (out, err, _):
        code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mcpmux.yaml"
    path.write_text(PROJECT, encoding="utf-8")
    return path


def test_add_stdio_then_remove_restores_the_file_byte_for_byte(project: Path) -> None:
    code, out, _ = invoke("add", "time", "--env", "TZ=UTC", "--timeout", "5000", "--", "uvx", "mcp-server-time", "-v")
    assert code == 0 and "added 'time'" in out
    server = load_file(project).server("time")
    assert server.type == "stdio" and server.command == "uvx" and server.args == ("mcp-server-time", "-v")
    assert server.timeout_ms == 5000
    assert invoke("remove", "time")[0] == 0
    assert project.read_bytes() == PROJECT.encode()


def test_add_a_network_server_with_headers_keeps_references(project: Path) -> None:
    code, out, err = invoke(
        "add", "web", "-t", "sse", "https://h/sse", "-H", "Authorization: Bearer ${WEB_TOKEN}", "--json"
    )
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["action"] == "add" and data["file"] == str(project) and data["warnings"] == []
    assert data["entry"] == {
        "name": "web",
        "type": "sse",
        "url": "https://h/sse",
        "headers": {"Authorization": "Bearer ${WEB_TOKEN}"},
    }
    assert "Bearer ${WEB_TOKEN}" in project.read_text(encoding="utf-8")


def test_the_type_is_guessed_from_the_url(project: Path) -> None:
    invoke("add", "ws", "wss://h/mcp")
    invoke("add", "h", "https://h/mcp")
    assert load_file(project).server("ws").type == "websocket"
    assert load_file(project).server("h").type == "http"


def test_a_literal_secret_is_written_but_warned_about(project: Path) -> None:
    code, _, err = invoke("add", "gh", "--env", "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwx", "--", "npx", "x")
    assert code == 0
    assert "warning: env GITHUB_TOKEN looks like a secret" in err and "${GITHUB_TOKEN}" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "alpha", "--", "x"], "a server named 'alpha' already exists"),
        (["add", "Not_Legal", "--", "x"], "illegal server name 'Not_Legal'"),
        (["add"], "no terminal to ask in"),
        (["add", "web", "-t", "http", "a", "b"], "exactly one URL"),
        (["add", "s", "-H", "A: b", "--", "cmd"], "--header is for network servers"),
    ],
)
def test_add_refusals_exit_2_and_leave_the_file_alone(project: Path, args: list[str], message: str) -> None:
    code, _, err = invoke(*args)
    assert code == 2 and message in err
    assert project.read_bytes() == PROJECT.encode()


def test_add_json_takes_a_claude_style_object(project: Path) -> None:
    code, out, _ = invoke("add-json", "fetch", '{"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]}')
    assert code == 0 and "added 'fetch'" in out
    assert "    - name: fetch\n      type: stdio\n      command: uvx\n" in project.read_text(encoding="utf-8")
    assert invoke("add-json", "bad", "[1]")[0] == 2
    assert invoke("add-json", "Bad Name", '{"command": "x"}')[0] == 2


def test_user_scope_writes_the_user_file(project: Path) -> None:
    assert invoke("add", "mine", "--scope", "user", "--", "my-server")[0] == 0
    assert user_config_file().read_text(encoding="utf-8").startswith("mcp:\n  servers:\n    - name: mine\n")
    assert invoke("remove", "mine")[0] == 0
    assert user_config_file().read_text(encoding="utf-8") == "mcp:\n  servers:\n"
    assert project.read_bytes() == PROJECT.encode()


def test_disable_enable_and_rename_edit_the_defining_file(project: Path) -> None:
    code, out, _ = invoke("disable", "alpha", "--json")
    assert code == 0 and json.loads(out)["changed"] is True
    assert load_file(project).server("alpha").enabled is False
    assert json.loads(invoke("disable", "alpha", "--json")[1])["changed"] is False
    invoke("enable", "alpha")
    assert project.read_bytes() == PROJECT.encode()
    code, out, _ = invoke("rename", "alpha", "beta", "--json")
    assert code == 0 and json.loads(out)["old_name"] == "alpha"
    assert project.read_text(encoding="utf-8") == PROJECT.replace("name: alpha", "name: beta")


def test_unknown_servers_and_taken_names_exit_2(project: Path) -> None:
    assert invoke("remove", "nope")[0] == 2
    invoke("add", "beta", "--", "b")
    code, _, err = invoke("rename", "alpha", "beta")
    assert code == 2 and "already exists" in err


def test_import_then_export_round_trips_through_claude_code(project: Path, tmp_path: Path) -> None:
    mcp_json = tmp_path / ".mcp.json"
    servers = {
        "github": {"type": "stdio", "command": "npx", "args": ["-y", "gh"], "env": {"T": "${GH_TOKEN}"}},
        "alpha": {"command": "other"},
    }
    mcp_json.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    code, out, _ = invoke("import", "--from", "claude-code", "--json")
    data = json.loads(out)
    assert code == 0 and data["imported"] == ["github"] and data["skipped"][0]["name"] == "alpha"
    assert "env: {T: '${GH_TOKEN}'}" in project.read_text(encoding="utf-8")
    out_file = tmp_path / "out.json"
    out_file.write_text('{"keep": 1, "mcpServers": {"x": {"command": "y"}}}', encoding="utf-8")
    assert invoke("export", "--to", "claude-code", "--output", str(out_file))[0] == 0
    exported = json.loads(out_file.read_text(encoding="utf-8"))
    assert exported["keep"] == 1 and exported["mcpServers"]["x"] == {"command": "y"}
    assert exported["mcpServers"]["github"] == servers["github"]


def test_export_prints_the_hosts_json_with_references(project: Path) -> None:
    invoke("add", "gh", "--env", "T=${GH_TOKEN}", "--", "npx", "gh")
    code, out, _ = invoke("export", "--to", "vscode")
    assert code == 0
    assert json.loads(out)["servers"]["gh"] == {
        "type": "stdio",
        "command": "npx",
        "args": ["gh"],
        "env": {"T": "${env:GH_TOKEN}"},
    }


def test_import_of_a_missing_host_file_exits_2(project: Path) -> None:
    code, _, err = invoke("import", "--from", "cursor")
    assert code == 2 and "no cursor configuration found" in err


def test_add_from_registry_stores_secrets_as_references(project: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "server.json"
    manifest.write_text(
        json.dumps(
            {
                "name": "io.github.acme/weather",
                "packages": [
                    {
                        "registryType": "npm",
                        "identifier": "@acme/weather",
                        "version": "1.2.0",
                        "environmentVariables": [
                            {"name": "WEATHER_KEY", "isRequired": True, "isSecret": True, "description": "API key"}
                        ],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    code, out, err = invoke("add", "--from-registry", str(manifest), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["entry"]["env"] == {"WEATHER_KEY": "${WEATHER_KEY}"} and data["server"] == "weather"
    assert data["entry"]["args"] == ["-y", "@acme/weather@1.2.0"]
    assert "export WEATHER_KEY" in err
