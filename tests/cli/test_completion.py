"""``mcpmux completion``: scripts for bash, zsh and fish; server names from the config, tools from the catalog."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click
import mcp_types as types
import pytest

from mcpmux.cli.completion import COMPLETE_VAR, complete_prompts, complete_servers, complete_tools
from mcpmux.cli.main import cli
from mcpmux.config import load_config
from mcpmux.manager.catalog import Catalog, CatalogEntry, fingerprint
from tests.forkserver import MCPMUX


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n"
        "    - {name: github, command: gh-not-installed}\n"
        "    - {name: gitlab, command: gl-not-installed, prefix: gl}\n"
        "    - {name: time, command: time-not-installed}\n",
        encoding="utf-8",
    )
    return tmp_path


def _complete(*words: str) -> list[str]:
    env = dict(os.environ, COMP_WORDS=" ".join(["mcpmux", *words]), COMP_CWORD=str(len(words)))
    env[COMPLETE_VAR] = "bash_complete"
    done = subprocess.run([MCPMUX], capture_output=True, text=True, env=env, timeout=30, check=True)
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


@pytest.mark.parametrize(
    ("shell", "marker"), [("bash", "complete -o"), ("zsh", "compdef"), ("fish", "complete --no-files --command mcpmux")]
)
def test_the_script_is_clicks_for_each_shell(shell: str, marker: str) -> None:
    done = subprocess.run([MCPMUX, "completion", shell], capture_output=True, text=True, timeout=30, check=True)
    assert COMPLETE_VAR in done.stdout and marker in done.stdout


@pytest.mark.subprocess
def test_commands_and_server_names_complete_in_a_real_shell_protocol(project: Path) -> None:
    assert {"add", "remove", "doctor", "completion"} <= set(_complete(""))
    assert _complete("rem") == ["remove"]
    assert _complete("remove", "git") == ["github", "gitlab"]
    assert _complete("rename", "t") == ["time"]
    assert _complete("import", "--from", "c") == ["claude-code", "claude-desktop", "cursor"]


def test_tool_names_come_from_the_catalog_and_start_nothing(project: Path) -> None:
    config = load_config()
    with Catalog() as catalog:
        for server in config.servers[:2]:
            tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in ("create_issue", "list_issues")]
            prompts = [types.Prompt(name="triage")]
            catalog.store(server.name, fingerprint(server), CatalogEntry(tools=tools, prompts=prompts))
    with click.Context(cli) as ctx:
        names = [item.value for item in complete_tools(ctx, click.Argument(["name"]), "g")]
        servers = [item.value for item in complete_servers(ctx, click.Argument(["name"]), "")]
        prompts = [item.value for item in complete_prompts(ctx, click.Argument(["name"]), "")]
    assert prompts == ["github:triage", "gl:triage"]
    assert names == ["github:create_issue", "github:list_issues", "gl:create_issue", "gl:list_issues"]
    assert servers == ["github", "gitlab", "time"]


def test_a_broken_config_completes_nothing(project: Path) -> None:
    (project / "mcpmux.yaml").write_text("mcp: {servers: [{name: x}]}\n", encoding="utf-8")
    with click.Context(cli) as ctx:
        assert complete_servers(ctx, click.Argument(["name"]), "") == []
        assert complete_tools(ctx, click.Argument(["name"]), "") == []


def test_the_colon_aware_bash_script_is_clicks_plus_the_line_and_cursor() -> None:
    # click's template is private: this fails when click changes it, so ours can follow.
    from click import shell_completion

    from mcpmux.cli import completion

    added = 'COMP_LINE="$COMP_LINE" COMP_POINT=$COMP_POINT COMP_WORDBREAKS="$COMP_WORDBREAKS" '
    ours = completion._SOURCE_BASH.replace(added, "")
    assert ours == shell_completion._SOURCE_BASH
