"""Two ``mcpmux serve --http`` processes on one real PostgreSQL (``storage.url``): a token made by the
CLI works on both, a revocation is refused by both at their next request, and the audit rows of
either are in the shared database."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import mcpmux, serve
from tests.peers.fixtures import stdio_command
from tests.replicas.conftest import shared_database
from tests.serve.test_serve_http import INIT, MCP_HEADERS, _Streams, text
from tests.sources.conftest import postgres_server

__all__ = ["postgres_server", "shared_database"]

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]


def config_on(root: Path, url: str) -> Path:
    command, args = stdio_command("time")
    path = root / "mcpmux.json"
    servers = [{"name": "time", "type": "stdio", "command": command, "args": args}]
    path.write_text(json.dumps({"mcp": {"servers": servers, "security": {"pinning": "off"}}, "storage": {"url": url}}))
    return path


def initialize(url: str, token: str) -> int:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx2.post(url, content=json.dumps(INIT).encode(), headers=headers, timeout=10).status_code


async def test_two_gateways_share_tokens_and_audit_through_postgresql(tmp_path: Path, shared_database: str) -> None:
    first_root, second_root = tmp_path / "a", tmp_path / "b"
    first_root.mkdir()
    second_root.mkdir()
    config = config_on(tmp_path, shared_database)
    made = mcpmux(first_root, config, "token", "create", "alice", "--json")
    assert made.returncode == 0, made.stderr
    alice = json.loads(made.stdout)["token"]
    # A second token, so that tokens stay required on loopback once alice's is revoked.
    assert mcpmux(first_root, config, "token", "create", "bob").returncode == 0
    with (
        serve(first_root, config, "--http", "127.0.0.1:0") as first,
        serve(second_root, config, "--http", "127.0.0.1:0") as second,
    ):
        assert initialize(first.url, alice) == 200 and initialize(second.url, alice) == 200
        assert initialize(second.url, "mcpmux_forged") == 401
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {alice}"}, timeout=30) as http,
                streamable_http_client(second.url, http_client=http) as (read, write),
                Client(_Streams(read, write), mode="legacy") as client,
            ):
                assert text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))
        revoked = mcpmux(second_root, config, "token", "revoke", "alice")
        assert revoked.returncode == 0, revoked.stderr
        assert initialize(first.url, alice) == 401 and initialize(second.url, alice) == 401
    rows = json.loads(mcpmux(first_root, config, "audit", "--json").stdout)
    assert [(r["face"], r["caller"], r["name"], r["outcome"]) for r in rows] == [
        ("gateway", "token:alice", "time:get_current_time", "ok")
    ]
    for root in (first_root, second_root):  # nothing went to a local state.db
        assert not (root / "data" / "mcpmux" / "state.db").exists()
