"""``mcpmux config path|show|validate`` and the CLI's global contract (exit codes, --json, errors)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpmux.cli.main import cli, run

SECRET = "tok-verysecret-42"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("API_TOKEN", SECRET)
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n"
        "    - {name: api, type: http, url: 'https://h/mcp?key=${API_TOKEN}', headers: {Authorization: 'Bearer x'}}\n"
        "    - {name: local, type: stdio, command: mytool, env: {PLAIN: visible-value}}\n",
        encoding="utf-8",
    )
    return tmp_path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), standalone_mode=False, catch_exceptions=False)
    code = result.return_value if isinstance(result.return_value, int) else result.exit_code
    return code, result.stdout, result.stderr


def test_show_masks_env_headers_and_interpolated_values(project: Path) -> None:
    code, out, _ = invoke("config", "show")
    assert code == 0
    assert SECRET not in out and "visible-value" not in out and "Bearer x" not in out
    assert "****" in out and "mytool" in out


def test_show_secrets_reveals_them(project: Path) -> None:
    _, out, _ = invoke("config", "show", "--show-secrets", "--json")
    data = json.loads(out)
    api = data["mcp"]["servers"][0]
    assert api["headers"] == {"Authorization": "Bearer x"} and SECRET in api["url"]


def test_an_oauth_client_secret_is_shown_only_with_show_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n    - name: m2m\n      type: http\n      url: https://h/mcp\n"
        "      auth: {grant: client_credentials, client_id: robot, client_secret: cs-very-secret-1}\n",
        encoding="utf-8",
    )
    _, shown, _ = invoke("config", "show", "--show-secrets", "--json")
    _, masked, _ = invoke("config", "show", "--json")
    assert json.loads(shown)["mcp"]["servers"][0]["auth"]["client_secret"] == "cs-very-secret-1"
    auth = json.loads(masked)["mcp"]["servers"][0]["auth"]
    assert auth == {"grant": "client_credentials", "client_id": "robot", "client_secret": "****"}
    _, text, _ = invoke("config", "show")
    assert "cs-very-secret-1" not in text


@pytest.mark.parametrize("argv", [["--json", "config", "show"], ["config", "show", "--json"]])
def test_json_is_accepted_before_or_after_the_command(project: Path, argv: list[str]) -> None:
    _, out, _ = invoke(*argv)
    assert [s["name"] for s in json.loads(out)["mcp"]["servers"]] == ["api", "local"]


def test_path_lists_sources_in_order(project: Path) -> None:
    _, out, _ = invoke("config", "path", "--json")
    rows = json.loads(out)
    assert [r["role"] for r in rows] == ["defaults", "user", "project"]
    assert rows[2]["read"] is True and rows[0]["read"] is False


def test_validate_ok_and_broken_file_exit_codes(project: Path) -> None:
    assert invoke("config", "validate")[0] == 0
    broken = project / "broken.yaml"
    broken.write_text("mcp:\n  servers:\n    - {name: x, type: stdio}\n    - {name: y, type: http}\n")
    code, out, err = invoke("config", "validate", str(broken), "--json")
    assert code == 2
    problems = json.loads(out)["problems"]
    assert [p["path"] for p in problems] == ["mcp.servers[0] (x).command", "mcp.servers[1] (y).url"]
    assert "broken.yaml:3:" in err


def test_a_config_error_is_one_error_line_plus_hint_and_exit_2(project: Path) -> None:
    (project / "mcpmux.yaml").write_text("mcp:\n  servers:\n    - {name: x, type: stdio}\n")
    assert run(["config", "show"]) == 2


def test_installed_console_script_help_version_and_error_output(project: Path) -> None:
    exe = Path(sys.executable).parent / "mcpmux"
    help_run = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False)
    assert help_run.returncode == 0 and "config" in help_run.stdout
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False)
    assert version.stdout.startswith("mcpmux, version ")
    (project / "mcpmux.yaml").write_text("mcp:\n  servers:\n    - {name: x, type: stdio}\n")
    failing = subprocess.run([exe, "config", "show"], capture_output=True, text=True, check=False, env=os.environ)
    assert failing.returncode == 2 and failing.stdout == ""
    lines = failing.stderr.splitlines()
    assert lines[0].startswith("Error: invalid configuration:") and lines[-1].startswith("hint: ")


def test_unknown_command_is_a_usage_error() -> None:
    assert run(["definitely-not-a-command"]) == 2
