"""Three ``mcpmux serve --http`` replicas on one PostgreSQL, reached through a balancer without affinity.

Every request of a client goes to the next replica (nginx with the shipped config, or
:class:`~tests.replicas.conftest.RoundRobin`), so a 2025-11-25 session's
requests and a 2026-07-28 call's retries land on replicas that do not hold them: the replicas
forward them to the owner. Also: a session whose replica died answers 404 (the client starts
again), a token revoked on one replica is refused by all, and one replica's id cannot be taken by
a second live process.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.serving import Serving, mcpmux, serve
from tests.peers.fixtures import stdio_command
from tests.replicas.conftest import RoundRobin, free_port, replica_config, replicas, start_replica
from tests.replicas.nginx import start_nginx
from tests.serve.test_serve_http import INIT, MCP_HEADERS, _Streams, text

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

WAIT_S = 90
STATE_WAIT_S = 30


def health(base: str, token: str) -> dict[str, object]:
    reply = httpx.get(f"{base}/healthz", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert reply.status_code == 200, reply.text
    body: dict[str, object] = reply.json()
    return body


def port_of(serving: Serving) -> int:
    return int(serving.base.rsplit(":", 1)[1])


def wait_for_peers(base: str, token: str, count: int = 3) -> list[str]:
    """The ids of the live replicas ``base`` knows, once it knows ``count`` (heartbeats come every 2 s)."""
    deadline = time.monotonic() + 30
    while True:
        found = sorted(str(p["id"]) for p in dict(health(base, token)["replica"])["peers"])  # type: ignore[attr-defined]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def forwarded(bases: list[str], token: str) -> int:
    return sum(sum(dict(health(b, token)["replica"])["forwarded"].values()) for b in bases)  # type: ignore[arg-type]


@pytest.mark.slow
async def test_clients_of_both_eras_hop_replicas_with_approval_and_sampling(
    tmp_path: Path, shared_database: str
) -> None:
    config = replica_config(
        tmp_path, shared_database, ("time", "everything"), require_approval=["time:get_current_time"]
    )
    made = mcpmux(tmp_path, config, "token", "create", "approver", "--can-approve")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    asked: list[str] = []

    async def approve(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "yes"})

    async def sample(context: object, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="four"), model="test")

    with replicas(tmp_path, config, 3) as served, start_nginx([port_of(s) for s in served], tmp_path) as (port, _):
        bases = [s.base for s in served]
        assert all(dict(health(b, token)["replica"])["listening"] for b in bases)
        assert wait_for_peers(bases[0], token) == ["r1", "r2", "r3"]
        with anyio.fail_after(WAIT_S):
            for mode in ("legacy", "2026-07-28"):
                auth = {"Authorization": f"Bearer {token}"}
                async with (
                    # nginx with the shipped deploy/nginx.conf: round-robin, no affinity.
                    httpx2.AsyncClient(headers=auth, timeout=60) as http,
                    streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http) as (read, write),
                    Client(
                        _Streams(read, write),
                        mode=mode,
                        elicitation_callback=approve,
                        sampling_callback=sample,  # type: ignore[arg-type]
                    ) as client,
                ):
                    names = {t.name for t in (await client.list_tools()).tools}
                    assert {"time__get_current_time", "everything__trigger-sampling-request"} <= names
                    for _ in range(3):
                        assert "UTC" in text(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))
                    sampled = await client.call_tool(
                        "everything__trigger-sampling-request", {"prompt": "2+2?", "maxTokens": 5}
                    )
                    assert not sampled.is_error and "four" in text(sampled), text(sampled)
        assert len(asked) == 6
        assert forwarded(bases, token) > 0
    # Every replica's audit rows are in the one table.
    rows = json.loads(mcpmux(tmp_path, config, "audit", "--json").stdout)
    assert sum(1 for r in rows if r["name"] == "time:get_current_time" and r["outcome"] == "ok") == 6


@pytest.mark.slow
def test_a_session_whose_replica_died_answers_404_and_a_new_one_works(tmp_path: Path, shared_database: str) -> None:
    config = replica_config(tmp_path, shared_database)
    with replicas(tmp_path, config, 2) as (first, second):
        opened = httpx.post(first.url, content=json.dumps(INIT).encode(), headers=MCP_HEADERS, timeout=30)
        session = opened.headers["mcp-session-id"]
        assert session.startswith("r1~")
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
        # Through the other replica: forwarded to r1, answered.
        assert httpx.post(second.url, json=ping, headers=headers, timeout=30).status_code == 200
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
        gone = httpx.post(second.url, json=ping, headers=headers, timeout=30)
        assert gone.status_code == 404 and "Session not found" in gone.text
        reopened = httpx.post(second.url, content=json.dumps(INIT).encode(), headers=MCP_HEADERS, timeout=30)
        assert reopened.status_code == 200 and reopened.headers["mcp-session-id"].startswith("r2~")


@pytest.mark.slow
def test_a_token_revoked_on_one_replica_is_refused_by_all_at_once(tmp_path: Path, shared_database: str) -> None:
    config = replica_config(tmp_path, shared_database)
    alice = mcpmux(tmp_path, config, "token", "create", "alice").stdout.strip()
    bob = mcpmux(tmp_path, config, "token", "create", "bob").stdout.strip()
    with replicas(tmp_path, config, 3) as served:
        bases = [s.base for s in served]

        def status(base: str) -> int:
            headers = {**MCP_HEADERS, "Authorization": f"Bearer {alice}"}
            return httpx.post(f"{base}/mcp", content=json.dumps(INIT).encode(), headers=headers, timeout=30).status_code

        assert [status(b) for b in bases] == [200, 200, 200]
        assert all(dict(health(b, bob)["replica"])["listening"] for b in bases)
        revoked = mcpmux(tmp_path, config, "token", "revoke", "alice")
        assert revoked.returncode == 0, revoked.stderr
        started, refused = time.monotonic(), set()
        while len(refused) < len(bases) and time.monotonic() - started < 30:
            refused |= {b for b in bases if status(b) == 401}
        assert len(refused) == len(bases)
        # Each replica says who it is and whom it sees: /api/replicas, /metrics (a token needed for both).
        auth = {"Authorization": f"Bearer {bob}"}
        listed = httpx.get(f"{bases[1]}/api/replicas", headers=auth, timeout=10).json()
        assert listed["id"] == "r2" and listed["listening"] is True
        assert {p["id"] for p in listed["peers"]} <= {"r1", "r2", "r3"} and listed["peers"]
        assert httpx.get(f"{bases[1]}/api/replicas", timeout=10).status_code == 401
        metrics = httpx.get(f"{bases[2]}/metrics", headers=auth, timeout=10).text
        assert 'mcpmux_replica_info{replica="r3"' in metrics and "mcpmux_replica_listening 1" in metrics


@pytest.mark.slow
def test_a_replica_id_held_by_a_live_process_is_refused(tmp_path: Path, shared_database: str) -> None:
    config = replica_config(tmp_path, shared_database)
    port = free_port()
    with start_replica(tmp_path, config, "r1", port):
        other = free_port()
        home = tmp_path / "twin"
        home.mkdir()
        advertise = f"http://127.0.0.1:{other}"
        args = ("serve", "--http", f"127.0.0.1:{other}", "--replica-id", "r1", "--advertise", advertise)
        twin = mcpmux(home, config, *args, timeout_s=60)
        assert twin.returncode != 0
        assert "replica id 'r1'" in twin.stderr and "another live replica holds it" in twin.stderr


@pytest.mark.slow
def test_a_replica_needs_postgresql(tmp_path: Path) -> None:
    config = replica_config(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    result = mcpmux(tmp_path, config, "serve", "--http", "127.0.0.1:0", "--replica-id", "r1", "--advertise",
                    "http://127.0.0.1:1")  # fmt: skip
    assert result.returncode != 0 and "replicas share their state through PostgreSQL" in result.stderr


def test_advertise_must_be_an_http_url(tmp_path: Path) -> None:
    config = replica_config(tmp_path, f"sqlite:///{tmp_path / 'state.db'}")
    result = mcpmux(tmp_path, config, "serve", "--http", "127.0.0.1:0", "--advertise", "ftp://x")
    assert result.returncode != 0 and "--advertise" in result.stderr


__all__ = ["serve"]


@pytest.mark.slow
async def test_an_approval_given_on_one_replica_releases_a_call_waiting_on_another(
    tmp_path: Path, shared_database: str
) -> None:
    config = replica_config(tmp_path, shared_database, require_approval=["time:get_current_time"])
    tokens = {}
    for name, scopes in (("admin", ("read", "execute", "admin")), ("agent", ("read", "execute"))):
        made = mcpmux(tmp_path, config, "token", "create", name, *[a for s in scopes for a in ("--scope", s)])
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip()
    with replicas(tmp_path, config, 2) as (first, second):
        results: list[types.CallToolResult] = []

        async def call_on_first() -> None:
            # The agent's token may not approve, and the client cannot be asked: its call waits for a person.
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens['agent']}"}, timeout=WAIT_S) as http,
                streamable_http_client(first.url, http_client=http) as (read, write),
                Client(_Streams(read, write), mode="legacy") as client,
            ):
                results.append(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))

        with anyio.fail_after(WAIT_S):
            async with (
                httpx.AsyncClient(base_url=second.base, timeout=30) as console,
                anyio.create_task_group() as tg,
            ):
                origin = {"Origin": second.base}
                login = await console.post("/ui/login", data={"secret": tokens["admin"]}, headers=origin)
                assert login.status_code == 303
                tg.start_soon(call_on_first)
                while True:  # the second replica's console lists the call held on the first
                    html = (await console.get("/ui/approvals")).text
                    held = re.search(r'data-held="([^"]+)"', html)
                    if held:
                        break
                    await anyio.sleep(0.2)
                assert "token:agent" in html and "time:get_current_time" in html
                csrf = re.search(r'name="csrf" value="([^"]+)"', html)
                assert csrf is not None
                answered = await console.post(
                    f"/ui/approvals/{held.group(1)}", data={"csrf": csrf.group(1), "decision": "yes"}, headers=origin
                )
                assert answered.status_code == 303
        assert len(results) == 1 and "UTC" in text(results[0])
    rows = json.loads(mcpmux(tmp_path, config, "audit", "--json").stdout)
    assert [(r["caller"], r["outcome"]) for r in rows] == [("token:agent", "ok")]


@pytest.mark.slow
def test_a_source_registered_anywhere_is_served_by_every_replica(tmp_path: Path, shared_database: str) -> None:
    config = replica_config(tmp_path, shared_database)
    command, args = stdio_command("time")
    with replicas(tmp_path, config, 2) as served:
        fields = json.dumps({"type": "stdio", "command": command, "args": args})
        added = mcpmux(tmp_path, config, "sources", "add", "clock", "--config-json", fields)
        assert added.returncode == 0, added.stderr
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}}  # fmt: skip
        for replica in served:
            deadline, answer = time.monotonic() + WAIT_S, ""
            while time.monotonic() < deadline and '"isError":false' not in answer.replace(" ", ""):
                answer = stateless_post(replica.url, call)
                time.sleep(0.2)
            assert "UTC" in answer, (answer, replica.log())
        removed = mcpmux(tmp_path, config, "sources", "remove", "clock")
        assert removed.returncode == 0, removed.stderr
        for replica in served:
            deadline, answer = time.monotonic() + WAIT_S, ""
            while time.monotonic() < deadline and "clock__get_current_time" not in answer:
                answer = stateless_post(replica.url, call)
                time.sleep(0.2)
            assert "Unknown tool" in answer or "not found" in answer.lower() or "no tool" in answer.lower(), answer


def stateless_post(url: str, message: dict[str, object]) -> str:
    """One 2026-07-28 request (its metadata in ``_meta``), its answer's text."""
    meta = {
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    }
    params = {**dict(message["params"]), "_meta": meta}  # type: ignore[call-overload]
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": str(message["method"]),
               "Mcp-Name": str(params.get("name", ""))}  # fmt: skip
    return httpx.post(url, json={**message, "params": params}, headers=headers, timeout=30).text


@pytest.mark.slow
def test_a_console_session_is_served_whichever_replica_a_request_reaches(tmp_path: Path, shared_database: str) -> None:
    config = replica_config(tmp_path, shared_database)
    made = mcpmux(tmp_path, config, "token", "create", "admin", "--scope", "read", "--scope", "admin")
    assert made.returncode == 0, made.stderr
    with replicas(tmp_path, config, 3) as served:
        bases = [s.base for s in served]
        assert all(wait_for_peers(b, made.stdout.strip()) == ["r1", "r2", "r3"] for b in bases)
        balancer = RoundRobin(bases)
        with httpx.Client(base_url=bases[0], transport=balancer, timeout=30, follow_redirects=False) as browser:
            login = browser.post("/ui/login", data={"secret": made.stdout.strip()}, headers={"Origin": bases[0]})
            assert login.status_code == 303 and "mcpmux_replica" in browser.cookies
            # Every page after, through each replica in turn, is the signed-in one (never the sign-in form).
            for _ in range(6):
                page = browser.get("/ui/servers")
                assert page.status_code == 200 and "time" in page.text, page.text[:300]
                assert re.search(r"replica r[123] of 3", page.text)  # which replica served it, and how many live
            csrf = re.search(r'name="csrf" value="([^"]+)"', browser.get("/ui/servers").text)
            assert csrf is not None
            restarted = browser.post(
                "/ui/servers/time/restart", data={"csrf": csrf.group(1)}, headers={"Origin": bases[0]}
            )
            assert restarted.status_code in (200, 303), restarted.text[:300]
        assert forwarded(bases, made.stdout.strip()) >= 4


@pytest.mark.slow
def test_a_server_disabled_on_one_replica_is_disabled_on_all_and_stays_so_after_a_restart(
    tmp_path: Path, shared_database: str
) -> None:
    config = replica_config(tmp_path, shared_database)
    made = mcpmux(tmp_path, config, "token", "create", "admin", "--scope", "read", "--scope", "admin")
    assert made.returncode == 0, made.stderr
    auth = {"Authorization": f"Bearer {made.stdout.strip()}"}

    def states(base: str) -> str:
        return str(httpx.get(f"{base}/healthz", headers=auth, timeout=10).json()["servers"]["time"])

    def wait_for(bases: list[str], state: str) -> None:
        deadline = time.monotonic() + STATE_WAIT_S
        while {states(b) for b in bases} != {state} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert {states(b) for b in bases} == {state}

    with replicas(tmp_path, config, 2) as served:
        bases = [s.base for s in served]
        wait_for(bases, "connected")
        assert httpx.post(f"{bases[0]}/api/servers/time/disable", headers=auth, timeout=30).status_code == 200
        wait_for(bases, "disabled")  # the other replica followed
    with replicas(tmp_path, config, 1) as (again,):
        assert states(again.base) == "disabled"  # remembered across a restart
        assert httpx.post(f"{again.base}/api/servers/time/enable", headers=auth, timeout=30).status_code == 200
        wait_for([again.base], "connected")
