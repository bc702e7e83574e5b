"""``mcpmux import`` never copies a secret in plain text; ``export`` says when references stay unexpanded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpmux.cli.main import run
from mcpmux.config.loader import load_file

DATA = Path(__file__).parent / "data"
SECRET = "ghp_literalSecretValue123"


def invoke(*args: str) -> tuple[int, str, str]:
    with CliRunner().isolation() as (out, err, _):
        code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mcpmux.yaml"
    path.write_text("mcp:\n  servers: []\n", encoding="utf-8")
    return path


def test_import_turns_claude_desktop_secrets_into_references_and_names_the_variables(project: Path) -> None:
    code, out, _ = invoke("import", "--from", str(DATA / "claude_desktop_config.json"), "--json")
    assert code == 0
    written = project.read_text(encoding="utf-8")
    assert SECRET not in written
    assert "GITHUB_PERSONAL_ACCESS_TOKEN: '${GITHUB_PERSONAL_ACCESS_TOKEN}'" in written
    variables = json.loads(out)["variables"]
    assert variables == [
        {
            "server": "github-server",
            "field": "env.GITHUB_PERSONAL_ACCESS_TOKEN",
            "variable": "GITHUB_PERSONAL_ACCESS_TOKEN",
        }
    ]
    server = load_file(project, environ={"GITHUB_PERSONAL_ACCESS_TOKEN": SECRET}).server("github-server")
    assert server.env["GITHUB_PERSONAL_ACCESS_TOKEN"].get_secret_value() == SECRET  # type: ignore[union-attr]


def test_import_tells_the_user_what_to_export(project: Path) -> None:
    code, out, _ = invoke("import", "--from", str(DATA / "claude_desktop_config.json"))
    assert code == 0 and "export GITHUB_PERSONAL_ACCESS_TOKEN=" in out and SECRET not in out


def test_a_header_secret_keeps_its_scheme(project: Path, tmp_path: Path) -> None:
    source = tmp_path / "cursor.json"
    entry = {"url": "https://x.example/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}}
    source.write_text(json.dumps({"mcpServers": {"remote": entry}}), encoding="utf-8")
    assert invoke("import", "--from", str(source))[0] == 0
    written = project.read_text(encoding="utf-8")
    assert SECRET not in written and "Bearer ${REMOTE_TOKEN}" in written


def test_keep_secrets_copies_them_and_warns(project: Path) -> None:
    code, _, err = invoke("import", "--from", str(DATA / "claude_desktop_config.json"), "--keep-secrets")
    assert code == 0 and SECRET in project.read_text(encoding="utf-8") and "looks like a secret" in err


def test_export_to_claude_desktop_says_references_are_not_expanded(project: Path) -> None:
    invoke("add", "gh", "--env", "T=${GH_TOKEN}", "--", "npx", "gh")
    code, out, err = invoke("export", "--to", "claude-desktop")
    assert code == 0 and json.loads(out)["mcpServers"]["gh"]["env"] == {"T": "${GH_TOKEN}"}
    assert "does not expand" in err and "GH_TOKEN" in err and "--expand" in err
    assert "does not expand" not in invoke("export", "--to", "claude-code")[2]


def test_export_expand_writes_values_and_refuses_unset_variables(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoke("add", "gh", "--env", "T=${GH_TOKEN}", "--", "npx", "gh")
    monkeypatch.delenv("GH_TOKEN", raising=False)
    code, _, err = invoke("export", "--to", "claude-desktop", "--expand")
    assert code == 2 and "GH_TOKEN" in err
    monkeypatch.setenv("GH_TOKEN", "tok-123456")
    code, out, err = invoke("export", "--to", "claude-desktop", "--expand")
    assert code == 0 and json.loads(out)["mcpServers"]["gh"]["env"] == {"T": "tok-123456"}
    assert "does not expand" not in err
