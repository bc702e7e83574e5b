"""The gateway as a resource server for opaque tokens: introspection (RFC 7662) against a real oidc-provider.

oidc-provider issues opaque access tokens (client credentials) for the gateway's resource URL and
answers introspection for the gateway's own client; the clients' tokens carry groups (``groups`` and,
nested, ``realm_access.roles``). In process: the security middleware over a tiny app; in a real
process: ``mcpmux serve --http`` in front of mcp-server-time, with a policy rule for a group and the
audit rows it writes.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from mcpmux.api.serve import build_api
from mcpmux.config.models import (
    ApprovalRule,
    Config,
    SecurityConfig,
    Settings,
    StdioServerConfig,
    StreamableHttpServerConfig,
    WebSocketServerConfig,
)
from mcpmux.connection import Connection
from mcpmux.errors import MCPMuxError
from mcpmux.policy import StateStore
from mcpmux.policy.audit import AuditLog
from mcpmux.sources import SourceRegistry
from mcpmux.web.introspection import IntrospectionSettings, Introspector
from mcpmux.web.oauth_resource import ExternalTokenInfo, ExternalTokens, OAuthResourceSettings
from mcpmux.web.security import CALLER, HttpSecurity, SecurityMiddleware
from mcpmux.web.tokens import TokenStore
from tests.auth.world import OAuthWorld, oauth_world
from tests.peers.fixtures import free_port, run_listening, stdio_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

HOST = "gateway.test"
GATEWAY = "https://gateway.example.com/mcp"
GATEWAY_SECRET = "gateway-secret-0123456789"
DEADLINE_S = 90


@pytest.fixture
def world() -> Iterator[OAuthWorld]:
    with oauth_world(also_for=(GATEWAY,), opaque=True) as running:
        yield running


def token_of(world: OAuthWorld, client: str, resource: str = GATEWAY, scope: str = "mcp:read") -> str:
    """An opaque access token of ``client`` (client credentials) for ``resource``."""
    body = urllib.parse.urlencode({"grant_type": "client_credentials", "resource": resource, "scope": scope})
    basic = base64.b64encode(f"{client}:{client}-secret-0123456789".encode()).decode()
    request = urllib.request.Request(
        f"{world.issuer}/token", data=body.encode(), headers={"Authorization": f"Basic {basic}"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        token: str = json.load(answer)["access_token"]
    assert token.count(".") != 2, "the authorization server should issue opaque tokens here"
    return token


def revoke(world: OAuthWorld, client: str, token: str) -> None:
    body = urllib.parse.urlencode({"token": token, "token_type_hint": "access_token"})
    basic = base64.b64encode(f"{client}:{client}-secret-0123456789".encode()).decode()
    request = urllib.request.Request(
        f"{world.issuer}/token/revocation", data=body.encode(), headers={"Authorization": f"Basic {basic}"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


async def whoami(scope: Scope, receive: Receive, send: Send) -> None:
    info = scope[CALLER]
    groups = list(info.groups) if isinstance(info, ExternalTokenInfo) else None
    body = json.dumps({"caller": info.name, "groups": groups}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def introspecting(
    world: OAuthWorld, *, resource: str = GATEWAY, ttl_s: float = 30.0, groups_claim: str = "groups", **settings: object
) -> ExternalTokens:
    external = ExternalTokens(OAuthResourceSettings(issuer=world.issuer, resource=resource, groups_claim=groups_claim))
    options = IntrospectionSettings("gateway", GATEWAY_SECRET, ttl_s=ttl_s, **settings)  # type: ignore[arg-type]
    external.introspection = Introspector(options, issuer=world.issuer, resource=resource)
    return external


def client_of(external: ExternalTokens) -> httpx2.AsyncClient:
    app = SecurityMiddleware(whoami, HttpSecurity(allowed_hosts=[HOST], external=external))
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def status_once_refused(http: httpx2.AsyncClient, token: str) -> int:
    """Ask again until ``token`` is refused (bounded by the caller's deadline); the refusal's status."""
    for _attempt in range(1000):
        status = (await http.post("/mcp", headers=bearer(token))).status_code
        if status != 200:
            return status
        await anyio.sleep(0.2)
    return 200


async def test_an_opaque_token_is_introspected_and_its_subject_and_groups_name_the_caller(world: OAuthWorld) -> None:
    external = introspecting(world)
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            robot = await http.post("/mcp", headers=bearer(token_of(world, "robot")))
            intern = await http.post("/mcp", headers=bearer(token_of(world, "intern")))
    assert external.introspection is not None
    assert external.introspection.endpoint == f"{world.issuer}/token/introspection"  # from the metadata
    assert robot.status_code == 200 and robot.json() == {"caller": "oauth:robot", "groups": ["admins", "ops"]}
    assert intern.json() == {"caller": "oauth:intern", "groups": ["interns"]}


async def test_a_nested_groups_claim_is_read_by_its_dotted_path(world: OAuthWorld) -> None:
    external = introspecting(world, groups_claim="realm_access.roles")
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            answer = await http.post("/mcp", headers=bearer(token_of(world, "robot")))
    assert answer.json()["groups"] == ["realm-admins", "realm-ops"]


async def test_answers_are_cached_and_concurrent_requests_with_one_token_share_one_introspection(
    world: OAuthWorld,
) -> None:
    external = introspecting(world)
    token = token_of(world, "robot")
    statuses: list[int] = []
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:

            async def one() -> None:
                statuses.append((await http.post("/mcp", headers=bearer(token))).status_code)

            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(one)
            await one()
    assert statuses == [200] * 13
    assert external.introspection is not None and external.introspection.calls == 1


@pytest.mark.slow
async def test_a_revoked_token_is_refused_once_its_cached_answer_is_older_than_the_ttl(world: OAuthWorld) -> None:
    external = introspecting(world, ttl_s=1.0)
    token = token_of(world, "robot")
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            assert (await http.post("/mcp", headers=bearer(token))).status_code == 200
            revoke(world, "robot", token)
            status = await status_once_refused(http, token)
    assert status == 401


@pytest.mark.slow
async def test_an_expired_token_is_refused_even_while_the_ttl_would_still_trust_its_answer() -> None:
    with oauth_world(also_for=(GATEWAY,), opaque=True, access_ttl_s=2) as world:
        external = introspecting(world, ttl_s=3600.0)
        token = token_of(world, "robot")
        with anyio.fail_after(DEADLINE_S):
            await external.load()
            async with client_of(external) as http:
                assert (await http.post("/mcp", headers=bearer(token))).status_code == 200
                status = await status_once_refused(http, token)
    assert status == 401


async def test_a_token_for_another_resource_is_refused(world: OAuthWorld) -> None:
    external = introspecting(world)
    other = token_of(world, "robot", resource=world.mcp_url)  # a valid token, for the other MCP server
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            answer = await http.post("/mcp", headers=bearer(other))
    assert answer.status_code == 401
    assert "resource_metadata=" in answer.headers["www-authenticate"]


def mcpmux(argv: list[str], timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpmux", *argv], capture_output=True, text=True, timeout=timeout_s, check=False
    )


async def call_time(url: str, token: str) -> types.CallToolResult:
    server = StreamableHttpServerConfig(name="gw", url=url, headers={"Authorization": f"Bearer {token}"})
    async with Connection(server, Settings(connect_timeout_ms=60_000, timeout_ms=60_000)) as conn:
        return await conn.call_tool("time__get_current_time", {"timezone": "UTC"})


@pytest.mark.slow
async def test_serve_http_admits_introspected_tokens_and_a_policy_rule_matches_a_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``mcpmux serve --http`` in front of mcp-server-time: robot (admins) calls; the rule
    ``callers: [group:interns]`` denies intern; the audit rows name each caller with its groups."""
    port = free_port()
    gateway_url = f"http://127.0.0.1:{port}/mcp"
    command, args = stdio_command("time")
    config = tmp_path / "gateway.yaml"
    config.write_text(
        json.dumps({
            "mcp": {
                "servers": [{"name": "time", "type": "stdio", "command": command, "args": args}],
                "security": {
                    "pinning": "off",
                    "approval_rules": [{"tools": "time:*", "callers": ["group:interns"], "action": "deny"}],
                },
            }
        })
    )  # fmt: skip
    monkeypatch.setenv("MCPMUX_OAUTH_CLIENT_SECRET", GATEWAY_SECRET)
    with oauth_world(also_for=(gateway_url,), opaque=True) as world:
        argv = [
            sys.executable, "-m", "mcpmux", "--config", str(config), "serve", "--http", f"127.0.0.1:{port}",
            "--oauth-issuer", world.issuer, "--oauth-resource", gateway_url, "--oauth-client-id", "gateway",
        ]  # fmt: skip
        robot, intern = token_of(world, "robot", gateway_url), token_of(world, "intern", gateway_url)
        with run_listening(argv, port=port), anyio.fail_after(DEADLINE_S):
            allowed = await call_time(gateway_url, robot)
            denied = await call_time(gateway_url, intern)
            refused = httpx2.post(gateway_url, json={}, headers=bearer("not-a-token"), timeout=30)
    assert not allowed.is_error, allowed
    assert denied.is_error and "approval_rules[0]" in str(denied.content[0])
    assert refused.status_code == 401
    rows = json.loads(mcpmux(["--config", str(config), "audit", "--json"]).stdout)
    by_caller = {row["caller"]: row for row in rows}
    assert by_caller["token:oauth:robot (groups: admins, ops)"]["decision"] == "allowed"
    denial = by_caller["token:oauth:intern (groups: interns)"]
    assert denial["decision"] == "denied" and "group:interns" in denial["rule"]


def execute_once_connected(http: TestClient, body: dict[str, object], token: str) -> httpx2.Response:
    """POST ``body`` to the API's execute until its server has connected (503 while it connects)."""
    for _attempt in range(300):
        answer = http.post("/api/tools/execute", json=body, headers=bearer(token))
        if answer.status_code != 503:
            return answer
        time.sleep(0.2)
    return answer


async def test_the_rest_api_maps_groups_into_policy_and_audit_too(world: OAuthWorld, tmp_path: Path) -> None:
    command, args = stdio_command("time")
    rule = ApprovalRule(tools="time:*", callers=("group:interns",), action="deny")
    server = StdioServerConfig(name="time", command=command, args=args)
    config = Config(servers=(server,), security=SecurityConfig(pinning="off", approval_rules=(rule,)))
    external = introspecting(world)
    registry = SourceRegistry(f"sqlite:///{tmp_path / 'sources.db'}", key=b"k" * 32)
    store = StateStore(tmp_path / "state.db")
    security = HttpSecurity(allowed_hosts=[HOST], tokens=TokenStore(store), external=external)
    execute: dict[str, object] = {"tool_id": "time:get_current_time", "arguments": {"timezone": "UTC"}}
    robot = token_of(world, "robot", scope="mcpmux:execute")
    intern = token_of(world, "intern", scope="mcpmux:execute")
    try:
        with anyio.fail_after(DEADLINE_S):
            await external.load()
        app = build_api(config, registry, store=store, security=security)
        with TestClient(app, base_url=f"http://{HOST}") as http:
            allowed = execute_once_connected(http, execute, robot)
            denied = http.post("/api/tools/execute", json=execute, headers=bearer(intern))
        rows = AuditLog(store).query()
    finally:
        registry.close()
        store.close()
    assert allowed.status_code == 200, allowed.text
    assert denied.status_code == 403, denied.text
    callers = {row.caller: row.decision for row in rows}
    assert callers["token:oauth:robot (groups: admins, ops)"] == "allowed"
    assert callers["token:oauth:intern (groups: interns)"] == "denied"


async def calls_until_refused(conn: Connection) -> None:
    """Call until the connection is refused (bounded by the caller's deadline)."""
    for _attempt in range(300):
        await conn.call_tool("time__get_current_time", {"timezone": "UTC"})
        await anyio.sleep(0.1)


@pytest.mark.slow
async def test_the_websocket_face_admits_introspected_tokens_applies_their_groups_and_closes_on_revocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mcpmux serve --ws`` with the same OAuth options as --http. Before: the WebSocket face never
    introspected (every opaque token refused) and its callers had no groups (a ``group:`` deny rule
    did not apply there). Now: introspected at the handshake, groups in policy and audit, a revoked
    token ends the connection once its cached answer runs out, a made-up one is 401."""
    port = free_port()
    command, args = stdio_command("time")
    config = tmp_path / "gateway.yaml"
    servers = [{"name": "time", "type": "stdio", "command": command, "args": args}]
    rules = [{"tools": "time:*", "callers": ["group:interns"], "action": "deny"}]
    security = {"pinning": "off", "approval_rules": rules}
    config.write_text(json.dumps({"mcp": {"servers": servers, "security": security}}))
    monkeypatch.setenv("MCPMUX_OAUTH_CLIENT_SECRET", GATEWAY_SECRET)
    url = f"ws://127.0.0.1:{port}/"
    settings = Settings(connect_timeout_ms=60_000, timeout_ms=60_000)

    def socket(token: str) -> WebSocketServerConfig:
        return WebSocketServerConfig(name="gw", url=url, headers={"Authorization": f"Bearer {token}"})

    with oauth_world(also_for=(GATEWAY,), opaque=True) as world:
        argv = [
            sys.executable, "-m", "mcpmux", "--config", str(config), "serve", "--ws", f"127.0.0.1:{port}",
            "--oauth-issuer", world.issuer, "--oauth-resource", GATEWAY, "--oauth-client-id", "gateway",
            "--oauth-introspection-ttl", "1",
        ]  # fmt: skip
        robot, intern = token_of(world, "robot"), token_of(world, "intern")
        with run_listening(argv, port=port), anyio.fail_after(DEADLINE_S):
            async with Connection(socket(intern), settings) as conn:
                denied = await conn.call_tool("time__get_current_time", {"timezone": "UTC"})
            async with Connection(socket(robot), settings) as conn:
                allowed = await conn.call_tool("time__get_current_time", {"timezone": "UTC"})
                revoke(world, "robot", robot)
                with pytest.raises(MCPMuxError):  # asked again once the 1 s answer is stale: refused, closed
                    await calls_until_refused(conn)
            with pytest.raises(MCPMuxError, match="401"):
                await Connection(socket("not-a-token"), settings).connect()
    assert not allowed.is_error, allowed
    assert denied.is_error and "approval_rules[0]" in str(denied.content[0])
    rows = json.loads(mcpmux(["--config", str(config), "audit", "--json"]).stdout)
    callers = {(row["caller"], row["decision"]) for row in rows}
    assert ("token:oauth:intern (groups: interns)", "denied") in callers
    assert ("token:oauth:robot (groups: admins, ops)", "allowed") in callers
