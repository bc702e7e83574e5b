"""An unset ``${VAR}`` fails only the servers that use it; every other server and command works."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mcpmux.config import load_config
from mcpmux.errors import UnresolvedVariable
from mcpmux.transports import open_transport
from tests.forkserver import MCPMUX
from tests.peers.fixtures import stdio_command

UNSET = "MCPMUX_TEST_NEVER_SET_TOKEN"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(UNSET, raising=False)
    command, args = stdio_command("time")
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  settings: {connect_timeout_ms: 20000}\n  servers:\n"
        f"    - {{name: time, type: stdio, command: {json.dumps(command)}, args: {json.dumps(args)}}}\n"
        f"    - {{name: needs-token, type: stdio, command: sh, args: ['-c', 'exit 0'], env: {{T: '${{{UNSET}}}'}}}}\n"
        f"    - {{name: remote, type: http, url: '${{{UNSET}}}/mcp'}}\n",
        encoding="utf-8",
    )
    return tmp_path


def mcpmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPMUX, *args], capture_output=True, text=True, timeout=90, env=os.environ, check=False)


def test_the_config_loads_and_marks_only_the_servers_using_the_variable(project: Path) -> None:
    config = load_config()
    assert config.server("time").unresolved == ()
    for name, field in (("needs-token", "env.T"), ("remote", "url")):
        server = config.server(name)
        error = server.unresolved_error()
        assert isinstance(error, UnresolvedVariable) and error.variables == [UNSET]
        assert UNSET in str(error) and field in str(error) and UNSET in (error.hint or "")
    assert config.server("remote").url == f"${{{UNSET}}}/mcp"  # kept as written, never half-expanded


@pytest.mark.anyio
async def test_opening_a_server_with_an_unset_variable_starts_nothing(project: Path) -> None:
    config = load_config()
    with pytest.raises(UnresolvedVariable, match=UNSET):
        async with open_transport(config.server("needs-token"), config.settings):
            pytest.fail("the transport opened")


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.subprocess
def test_commands_for_other_servers_work_and_the_user_sees_which_variable(project: Path) -> None:
    call = mcpmux("call", "time:get_current_time", '{"timezone": "UTC"}')
    assert call.returncode == 0, call.stderr
    assert json.loads(call.stdout)["timezone"] == "UTC"

    listed = mcpmux("list", "--json")
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["time"]["state"] == "connected"
    for name in ("needs-token", "remote"):
        assert rows[name]["state"] == "failed" and UNSET in rows[name]["reason"]

    addressed = mcpmux("call", "needs-token:anything", "{}")
    assert addressed.returncode in (2, 3) and UNSET in addressed.stderr
    tested = mcpmux("test", "needs-token")
    assert tested.returncode == 2 and f"export {UNSET}" in tested.stderr


@pytest.mark.subprocess
def test_config_show_marks_the_server_and_validate_reports_it(project: Path) -> None:
    show = mcpmux("config", "show", "--json")
    assert show.returncode == 0, show.stderr
    servers = {s["name"]: s for s in json.loads(show.stdout)["mcp"]["servers"]}
    assert "unresolved" not in servers["time"]
    assert UNSET in servers["needs-token"]["unresolved"][0]
    assert UNSET in show.stderr

    validate = mcpmux("config", "validate", "--json")
    assert validate.returncode == 2
    paths = [p["path"] for p in json.loads(validate.stdout)["problems"]]
    assert paths == ["mcp.servers[1] (needs-token).env.T", "mcp.servers[2] (remote).url"]
