"""OAuth servers for daemon clients: the machine's token broker, and ``needs-auth`` with its login hint.

The daemon shares child processes; an HTTP server has none to share, so a command connects to it
itself, with the machine's broker (``mcpmux.auth``: one record per server, refreshed once per
machine under a cross-process lock), even when the daemon is required (``--daemon``), and its
stdio servers still go through the daemon in the same command. The tokens never cross the daemon's
socket. Run against the real authorization server of the OAuth tests (oidc-provider).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest

from mcpmux.auth.login import login
from mcpmux.auth.vault import open_vault
from mcpmux.config.models import StreamableHttpServerConfig
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser
from tests.daemon.conftest import Daemon, cli
from tests.daemon.test_daemon_lifecycle import _counter

pytestmark = [
    pytest.mark.slow,
    pytest.mark.peers,
    pytest.mark.subprocess,
    pytest.mark.network,
    pytest.mark.timeout(600),
]


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[OAuthWorld]:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")
    with oauth_world() as running:
        yield running


def test_an_oauth_server_needs_auth_then_works_beside_the_daemons_servers(
    world: OAuthWorld, daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    notes = {"name": "notes", "type": "http", "url": world.mcp_url}
    mcp = {"servers": [_counter("counter"), notes], "settings": {"connect_timeout_ms": 120_000}}
    (tmp_path / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")
    daemon.start("--linger", "600")
    # No login yet: exit 4 with the login hint, the daemon required or not (never "daemon unreachable").
    for flags in (("--daemon",), ("--no-daemon",)):
        code, out, err = cli(*flags, "call", "notes:read_note")
        assert (code, out) == (4, ""), err
        assert "mcpmux login notes" in err
    server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    anyio.run(lambda: login(server, open_vault(), browser=lambda url: scripted_browser(url, world)))
    code, out, err = cli("--daemon", "call", "notes:read_note")
    assert code == 0, err
    assert out.strip()
    code, out, err = cli("--daemon", "--json", "tools")  # both kinds in one command
    assert code == 0, err
    names = {t["name"] for t in json.loads(out)}
    assert {"counter:bump", "notes:read_note"} <= names, names
    status = daemon.status()
    assert status is not None
    assert [s["server"] for s in status["servers"]] == ["counter"]  # type: ignore[attr-defined]
    assert world.as_stats()["authorization_code"] == 1  # one login, used by every command


def test_a_connect_all_session_reaches_the_oauth_server_from_the_daemon_with_the_machines_token(
    world: OAuthWorld, daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``connect --all`` and ``connect notes`` are served in the daemon: it connects the HTTP server with the
    broker's token."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    monkeypatch.chdir(tmp_path)
    notes = {"name": "notes", "type": "http", "url": world.mcp_url}
    mcp = {"servers": [_counter("counter"), notes], "settings": {"connect_timeout_ms": 120_000}}
    (tmp_path / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")
    server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    anyio.run(lambda: login(server, open_vault(), browser=lambda url: scripted_browser(url, world)))
    daemon.start("--linger", "600")

    async def session(mode: str, target: str = "--all", tool: str = "notes__read_note") -> tuple[list[str], object]:
        env = {**daemon.env, "MCPMUX_DAEMON": mode}
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcpmux", "connect", target], env=env, cwd=str(tmp_path)
        )
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            with anyio.fail_after(120):
                await client.initialize()
                names: list[str] = []
                while tool not in names:  # over stdio the gateway answers before its upstreams connect
                    names = [t.name for t in (await client.list_tools()).tools]
                    if tool not in names:
                        await anyio.sleep(0.2)
                result = await client.call_tool(tool, {})
        return sorted(names), result.model_dump(mode="json")

    through = anyio.run(session, "on")
    status = daemon.status()
    assert status is not None and [s["server"] for s in status["servers"]] == ["counter"]  # type: ignore[attr-defined]
    assert through == anyio.run(session, "off")
    # `connect notes`: the HTTP server alone, in a session of the daemon (the shim is the relay).
    assert anyio.run(session, "on", "notes", "read_note") == anyio.run(session, "off", "notes", "read_note")
    assert world.as_stats()["authorization_code"] == 1  # the login's token, used by the daemon too
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}
    shim = subprocess.Popen(
        [sys.executable, "-m", "mcpmux", "--daemon", "connect", "notes"], env=daemon.env, cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert shim.stdin is not None and shim.stdout is not None
    try:
        shim.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        shim.stdin.write(b"\n")
        shim.stdin.flush()
        assert json.loads(shim.stdout.readline())["id"] == 1
        assert psutil.Process(shim.pid).cmdline()[-3:-1] == ["-m", "mcpmux.daemon.relay"]  # served by the daemon
        shim.communicate(timeout=120)
    finally:
        if shim.poll() is None:
            shim.kill()
            shim.communicate(timeout=60)
    assert shim.returncode == 0
