"""``mcpmux add NAME -t http URL`` against a real OAuth-protected MCP server offers ``mcpmux login NAME``.

The server is tests/auth's resource server in front of oidc-provider: its 401 challenges with
``Bearer resource_metadata=...``. Outside a terminal the hint is printed (stderr), nothing asked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcpmux.cli.main import run
from tests.auth.world import oauth_world
from tests.peers.fixtures import free_port


def invoke(*args: str) -> tuple[int, str, str]:
    with CliRunner().isolation(input="") as (out, err, _):
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


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
@pytest.mark.timeout(180)
def test_adding_a_server_that_asks_for_oauth_prints_the_login_hint(project: Path) -> None:
    with oauth_world() as world:
        code, _, err = invoke("add", "notes", "-t", "http", world.mcp_url)
    assert code == 0, err
    assert "asks for an OAuth login" in err and "mcpmux login notes" in err
    assert "notes" in project.read_text(encoding="utf-8"), "the server is added all the same"


@pytest.mark.network
def test_adding_a_server_that_does_not_answer_adds_it_without_a_hint(project: Path) -> None:
    code, _, err = invoke("add", "later", "-t", "http", f"http://127.0.0.1:{free_port()}/mcp")
    assert code == 0, err
    assert "login" not in err
    assert "later" in project.read_text(encoding="utf-8")


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
@pytest.mark.timeout(180)
def test_a_server_added_with_its_own_authorization_header_is_not_probed(project: Path) -> None:
    with oauth_world() as world:
        code, _, err = invoke("add", "notes", "-t", "http", world.mcp_url, "-H", "Authorization: Bearer static")
    assert code == 0, err
    assert "login" not in err
