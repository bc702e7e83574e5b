"""A server slower to start than its connect timeout: the error names `connect_timeout_ms`, says when a
package runner's first download is the likely cause, and `mcpmux add --connect-timeout` sets it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcpmux.config.loader import load_file
from mcpmux.config.models import StdioServerConfig
from mcpmux.manager.hints import connect_timeout_hint, package_runner
from tests.cli.test_manage import invoke
from tests.forkserver import MCPMUX

SLOW = Path(__file__).resolve().parents[1] / "fixtures" / "slow_server.py"
EXIT_UNREACHABLE = 3


def stdio(command: str, *args: str) -> StdioServerConfig:
    return StdioServerConfig(name="pkg", command=command, args=args)


@pytest.mark.parametrize(
    ("command", "args", "runner"),
    [
        ("npx", ("-y", "@modelcontextprotocol/server-memory"), "npx"),
        ("/usr/local/bin/uvx", ("mcp-server-time",), "uvx"),
        ("pipx", ("run", "mcp-server-fetch"), "pipx run"),
        ("docker", ("run", "-i", "--rm", "mcp/time"), "docker run"),
        ("bunx", ("some-server",), "bunx"),
        ("python", ("-m", "server"), None),
        ("docker", ("exec", "box", "server"), None),
    ],
)
def test_package_runners_are_recognised(command: str, args: tuple[str, ...], runner: str | None) -> None:
    assert package_runner(stdio(command, *args)) == runner


def test_the_hint_names_connect_timeout_ms_never_the_request_timeout() -> None:
    for server in (stdio("npx", "-y", "pkg"), stdio("python", "server.py")):
        hint = connect_timeout_hint(server)
        assert "connect_timeout_ms" in hint and "--connect-timeout" in hint
        assert "`timeout_ms`" not in hint and "--timeout " not in hint
    assert "first run of `npx` downloads the package" in connect_timeout_hint(stdio("npx", "-y", "pkg"))
    assert "pulls the image" in connect_timeout_hint(stdio("docker", "run", "mcp/time"))


@pytest.mark.parametrize(("given", "stored"), [("120s", 120_000), ("90", 90_000), ("2m", 120_000), ("1500ms", 1500)])
def test_add_writes_the_connect_timeout_in_milliseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, stored: int
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text("mcp:\n  servers: []\n", encoding="utf-8")
    code, _out, err = invoke("add", "mem", "--connect-timeout", given, "--", "npx", "-y", "server-memory")
    assert code == 0, err
    assert load_file(tmp_path / "mcpmux.yaml").server("mem").connect_timeout_ms == stored


def test_add_refuses_a_connect_timeout_that_is_not_a_duration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, _out, err = invoke("add", "mem", "--connect-timeout", "soon", "--", "npx", "server-memory")
    assert code == 2 and "not a duration" in err


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("argv", [["call", "pkg:echo", "{}"], ["test", "pkg"]])
def test_a_slow_npx_start_is_reported_with_the_setting_to_raise_and_the_first_download(
    tmp_path: Path, argv: list[str]
) -> None:
    # A real child named npx that is slower to answer than the connect timeout, as a cold npx is.
    npx = tmp_path / "bin" / "npx"
    npx.parent.mkdir()
    npx.write_text(f'#!/bin/sh\nexec {sys.executable} -S -E {SLOW} "$@"\n', encoding="utf-8")
    npx.chmod(0o755)
    config = tmp_path / "mcpmux.yaml"
    entry = f"{{name: pkg, type: stdio, command: {npx}, args: [-y, pkg], connect_timeout_ms: 1000}}"
    config.write_text(f"mcp:\n  servers:\n    - {entry}\n", encoding="utf-8")
    done = subprocess.run(
        [MCPMUX, "--config", str(config), *argv], capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    assert "connect timed out after 1 s" in done.stderr
    assert "connect_timeout_ms" in done.stderr and "downloads the package" in done.stderr
    assert "--timeout " not in done.stderr and "`timeout_ms`" not in done.stderr


def test_a_sandboxed_package_runner_that_times_out_is_told_the_sandbox_hides_its_cache_and_network() -> None:
    from mcpmux.config.models import SandboxConfig, ServerSecurity

    server = StdioServerConfig(
        name="pkg", command="npx", args=("-y", "pkg"), security=ServerSecurity(sandbox=SandboxConfig(enabled=True))
    )
    hint = connect_timeout_hint(server)
    assert "sandbox, which hides its package cache and the network" in hint
    assert "first run" not in hint  # the download cannot happen in there: waiting longer does not help
