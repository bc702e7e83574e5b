"""The installed ``mcpmux`` script managing servers: real processes, a real pty for the questions."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.forkserver import MCPMUX
from tests.peers.fixtures import stdio_command

pytestmark = pytest.mark.subprocess

PROJECT = """\
# servers I use
mcp:
  servers:
    - name: keep            # do not touch
      type: stdio
      command: keep-server
      args: ["--flag",  'quoted']
  # settings, tuned by hand
  settings: {timeout_ms: 30000, connect_timeout_ms: 20000,
             retry_attempts: 0}
"""


def mcpmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPMUX, *args],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mcpmux.yaml"
    path.write_text(PROJECT, encoding="utf-8")
    return path


def _spawn(*args: str) -> pexpect.spawn:
    return pexpect.spawn(MCPMUX, list(args), env=dict(os.environ, NO_COLOR="1"), encoding="utf-8", timeout=40)


def test_add_disable_rename_remove_keep_the_users_file_byte_for_byte(project: Path) -> None:
    added = mcpmux(
        "add", "fs", "-e", "ROOT=${HOME}", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"
    )
    assert added.returncode == 0, added.stderr
    assert mcpmux("disable", "fs").returncode == 0
    assert mcpmux("rename", "fs", "files").returncode == 0
    text = project.read_text(encoding="utf-8")
    assert text.startswith(PROJECT.split("  # settings")[0])
    assert "    - name: files\n      type: stdio\n      enabled: false\n      command: npx\n" in text
    assert "env: {ROOT: '${HOME}'}" in text
    assert mcpmux("remove", "files").returncode == 0
    assert project.read_bytes() == PROJECT.encode()


def test_refusals_exit_2_with_one_error_line_and_a_hint(project: Path) -> None:
    duplicate = mcpmux("add", "keep", "--", "x")
    assert duplicate.returncode == 2
    assert duplicate.stderr.splitlines()[0].endswith("a server named 'keep' already exists")
    assert "hint: choose another name" in duplicate.stderr
    no_terminal = mcpmux("add")
    assert no_terminal.returncode == 2 and "mcpmux add NAME [--env K=V]... -- COMMAND" in no_terminal.stderr
    assert project.read_bytes() == PROJECT.encode()


@pytest.mark.peers
def test_interactive_add_asks_step_by_step_then_tests_the_server(project: Path) -> None:
    command, args = stdio_command("time")
    child = _spawn("add")
    child.expect("Server name")
    child.sendline("clock")
    child.expect(r"Type .*\[stdio\]")
    child.sendline("")
    child.expect("Command and arguments")
    child.sendline(shlex.join([command, *args]))
    child.expect("Environment variable")
    child.sendline("TZ=UTC")
    child.expect("Environment variable")
    child.sendline("")
    child.expect("testing 'clock'")
    child.expect("get_current_time|2 tools|counts")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    entry = "    - name: clock\n      type: stdio\n      command: " + command
    assert entry in project.read_text(encoding="utf-8")


def test_interactive_add_of_a_broken_server_can_be_taken_back(project: Path) -> None:
    child = _spawn("add", "broken")
    child.expect(r"Type .*\[stdio\]")
    child.sendline("stdio")
    child.expect("Command and arguments")
    child.sendline("sh -c 'echo nope >&2; exit 3'")
    child.expect("Environment variable")
    child.sendline("")
    child.expect("Keep 'broken' in .* anyway")
    child.sendline("n")
    child.expect("removed 'broken' again")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 3
    assert project.read_bytes() == PROJECT.encode()


def test_registry_add_asks_for_required_values_and_keeps_secrets_as_references(project: Path, tmp_path: Path) -> None:
    variables = [
        {"name": "REGION", "isRequired": True, "description": "where"},
        {"name": "API_KEY", "isRequired": True, "isSecret": True},
    ]
    manifest = {
        "name": "io.example/weather",
        "packages": [{"registryType": "pypi", "identifier": "weather-mcp", "environmentVariables": variables}],
    }
    (tmp_path / "server.json").write_text(json.dumps(manifest), encoding="utf-8")
    child = _spawn("add", "--from-registry", "server.json")
    child.expect(r"REGION \(where\)")
    child.sendline("eu-west")
    child.expect("export API_KEY")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    text = project.read_text(encoding="utf-8")
    assert "env: {REGION: eu-west, API_KEY: '${API_KEY}'}" in text
