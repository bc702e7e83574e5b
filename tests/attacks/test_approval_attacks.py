"""Issue 15 item 2: a gateway client approved its own calls, and its "always" bound everyone.

A real ``mcpmux serve --http`` on loopback in front of the real ``mcp-server-time``; the clients
are real SDK clients over HTTP that answer the approval elicitation themselves (as a cross-site
page or a compromised agent would); the later ``mcpmux call`` is a real, non-interactive CLI.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import mcpmux, serve, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

TOOL, DOWNSTREAM = "time:get_current_time", "time__get_current_time"
ARGS = {"timezone": "UTC"}
DEADLINE_S = 90


class Answering:
    """An elicitation callback that answers every approval question with ``decision``, and counts them."""

    def __init__(self, decision: str = "always-server") -> None:
        self.decision, self.asked = decision, 0

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"decision": self.decision})


class _Streams:
    def __init__(self, read: object, write: object) -> None:
        self.pair = (read, write)

    async def __aenter__(self) -> tuple[object, object]:
        return self.pair

    async def __aexit__(self, *exc: object) -> None:
        return None


@asynccontextmanager
async def client(
    url: str, answering: Answering, token: str | None = None, mode: str = "legacy"
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        Client(_Streams(read, write), mode=mode, elicitation_callback=answering) as session,  # type: ignore[arg-type]
    ):
        yield session


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def token(root: Path, config: Path, name: str, *flags: str) -> str:
    made = mcpmux(root, config, "token", "create", name, *flags)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_network_client_answering_its_own_elicitation_is_not_asked_and_not_honoured(
    tmp_path: Path, mode: str
) -> None:
    config = write_config(tmp_path, ("time",), require_approval=[TOOL])
    page = Answering("always-server")
    # Without the console (with it, the call waits for a person there: tests/console/test_held_approvals.py).
    with serve(tmp_path, config, "--http", "127.0.0.1:0", "--no-ui") as serving, anyio.fail_after(DEADLINE_S):
        async with client(serving.url, page, mode=mode) as session:
            for _ in range(2):
                refused = await session.call_tool(DOWNSTREAM, ARGS)
                assert refused.is_error and "this caller may not approve" in text(refused)
                assert "mcpmux token create NAME --can-approve" in text(refused)
    assert page.asked == 0
    audit = json.loads(mcpmux(tmp_path, config, "audit", "--json").stdout)
    assert [(r["decision"], r["outcome"]) for r in audit] == [("denied", "refused")] * 2
    assert all("may not approve" in r["rule"] for r in audit)


@pytest.mark.slow
async def test_a_token_without_can_approve_cannot_approve(tmp_path: Path) -> None:
    config = write_config(tmp_path, ("time",), require_approval=[TOOL])
    bob = token(tmp_path, config, "bob")
    agent = Answering("yes")
    with serve(tmp_path, config, "--http", "127.0.0.1:0", "--no-ui") as serving, anyio.fail_after(DEADLINE_S):
        async with client(serving.url, agent, bob) as session:
            refused = await session.call_tool(DOWNSTREAM, ARGS)
    assert refused.is_error and "this caller may not approve" in text(refused)
    assert agent.asked == 0


@pytest.mark.slow
async def test_a_can_approve_token_approves_for_itself_only_and_never_for_a_later_cli_call(tmp_path: Path) -> None:
    config = write_config(tmp_path, ("time",), require_approval=[TOOL])
    alice, carol = token(tmp_path, config, "alice", "--can-approve"), token(tmp_path, config, "carol", "--can-approve")
    by_alice, by_carol = Answering("always-server"), Answering("no")
    with serve(tmp_path, config, "--http", "127.0.0.1:0") as serving, anyio.fail_after(DEADLINE_S):
        async with client(serving.url, by_alice, alice) as session:
            assert "UTC" in text(await session.call_tool(DOWNSTREAM, ARGS))
            assert "UTC" in text(await session.call_tool(DOWNSTREAM, ARGS))  # remembered for alice
        async with client(serving.url, by_carol, carol) as session:
            declined = await session.call_tool(DOWNSTREAM, ARGS)  # alice's "always" does not bind carol
    assert (by_alice.asked, by_carol.asked) == (1, 1)
    assert declined.is_error and "declined" in text(declined)
    later = mcpmux(tmp_path, config, "call", TOOL, json.dumps(ARGS))
    assert later.returncode == 1, later.stdout
    assert "not approved" in later.stderr and "UTC" not in later.stdout
    standing = json.loads(mcpmux(tmp_path, config, "approvals", "list", "--json").stdout)
    assert [(a["server"], a["tool"], a["face"], a["caller"]) for a in standing] == [
        ("time", "*", "gateway", "token:alice")
    ]


def test_tokens_made_before_can_approve_existed_may_not_approve(tmp_path: Path) -> None:
    import sqlite3

    from mcpmux.policy import StateStore
    from mcpmux.web.tokens import TokenStore, hash_token

    path = tmp_path / "state.db"
    # A state.db of the mcpmux before tokens could approve (schema version 2, the first tokens table).
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE pins (identity TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL, hash TEXT NOT NULL,"
        " definition TEXT NOT NULL, approved INTEGER NOT NULL, pinned_at REAL NOT NULL, pending_hash TEXT,"
        " pending_definition TEXT, pending_reason TEXT, PRIMARY KEY (identity, server, tool));"
        "CREATE TABLE gateway_tokens (name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created_at REAL);"
        "PRAGMA user_version = 2;"
    )
    old.execute("INSERT INTO gateway_tokens VALUES ('old', ?, 1.0)", (hash_token("mcpmux_old"),))
    old.commit()
    old.close()
    with StateStore(path) as store:
        tokens = TokenStore(store)
        old = tokens.check("mcpmux_old")
        assert old is not None and (old.name, old.can_approve, old.scopes) == ("old", False, [])
        tokens.create("new", can_approve=True)
        assert [(t.name, t.can_approve) for t in tokens.list()] == [("new", True), ("old", False)]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM mcpmux_gateway_tokens").fetchone() == (2,)
    finally:
        db.close()
