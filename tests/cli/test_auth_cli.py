"""``mcpmux login / logout / auth status`` as a person runs them, against a real authorization server.

The headless flow: ``login --no-browser`` prints the URL, the person signs in with a browser elsewhere
and pastes the address it ended on; the CLI finishes the login, ``auth status`` shows it without
the token, ``call`` uses it, ``logout`` forgets it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mcpmux.auth.vault import open_vault
from tests.auth.world import oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

CLI = [sys.executable, "-m", "mcpmux"]


@pytest.fixture(autouse=True)
def file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")


def mcpmux(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, "--config", str(config), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, check=False)


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(f"mcp:\n  servers:\n    - name: notes\n      type: http\n      url: {url}\n")
    return path


async def read_url(stream: anyio.abc.ByteReceiveStream) -> str:
    seen = b""
    while b"\n" not in seen.partition(b"http://")[2]:
        seen += await stream.receive()
    return "http://" + seen.partition(b"http://")[2].split(b"\n", 1)[0].decode().strip()


@pytest.mark.slow
async def test_a_headless_login_by_pasting_the_address_then_status_call_and_logout(tmp_path: Path) -> None:
    with oauth_world() as world:
        config = write_config(tmp_path, world.mcp_url)
        argv = [*CLI, "--config", str(config), "login", "notes", "--no-browser"]
        with anyio.fail_after(120):
            async with await anyio.open_process(argv) as process:
                assert process.stderr is not None
                assert process.stdin is not None
                url = await read_url(process.stderr)
                landing = await scripted_browser(url, world, land=False)
                await process.stdin.send(landing.encode() + b"\n")
                assert await process.wait() == 0
        record = open_vault().load("notes")
        assert record is not None
        assert record.tokens is not None

        status = mcpmux(config, "--json", "auth", "status")
        assert status.returncode == 0, status.stderr
        (row,) = json.loads(status.stdout)
        assert row["server"] == "notes"
        assert row["logged_in"] is True
        assert row["method"] == "authorization_code"
        assert record.tokens.access_token not in status.stdout + status.stderr

        called = mcpmux(config, "call", "notes:read_note")
        assert called.returncode == 0, called.stderr
        assert "the note" in called.stdout

        assert mcpmux(config, "logout", "notes").returncode == 0
        after = json.loads(mcpmux(config, "--json", "auth", "status").stdout)
        assert after == [{"server": "notes", "logged_in": False, "store": "file"}]

        denied = mcpmux(config, "call", "notes:read_note")
        assert denied.returncode == 4  # authentication needed
        assert "mcpmux login notes" in denied.stderr


def test_login_refuses_a_stdio_server(tmp_path: Path) -> None:
    config = tmp_path / "mcpmux.yaml"
    config.write_text("mcp:\n  servers:\n    - name: local\n      command: cat\n")
    result = mcpmux(config, "login", "local")
    assert result.returncode == 2
    assert "OAuth logins are for http and sse servers" in result.stderr
