"""The gateway as an OAuth resource server, with real tokens of a real authorization server (oidc-provider).

The middleware of every HTTP face accepts JWT access tokens of the configured issuer whose audience is
the gateway (signature by the issuer's JWKS), maps ``sub`` and scopes to the caller, keeps the static
tokens working beside them, publishes its protected resource metadata and points 401s at it.
"""

from __future__ import annotations

import base64
import json
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from mcpmux.api.serve import build_api
from mcpmux.config.models import Config, OAuthConfig, SecurityConfig, Settings, StreamableHttpServerConfig
from mcpmux.connection import Connection
from mcpmux.policy import StateStore
from mcpmux.sources import SourceRegistry
from mcpmux.web.oauth_resource import PRM_PATH, ExternalTokens, OAuthResourceSettings
from mcpmux.web.security import HttpSecurity, SecurityMiddleware
from mcpmux.web.tokens import TokenStore
from tests.auth.world import OAuthWorld, oauth_world
from tests.peers.fixtures import free_port, run_listening

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

HOST = "gateway.test"


@pytest.fixture
def world() -> Iterator[OAuthWorld]:
    with oauth_world() as running:
        yield running


def client_credentials_token(world: OAuthWorld, resource: str, scope: str = "mcp:read") -> str:
    body = urllib.parse.urlencode({"grant_type": "client_credentials", "resource": resource, "scope": scope})
    basic = base64.b64encode(b"robot:robot-secret-0123456789").decode()
    request = urllib.request.Request(
        f"{world.issuer}/token", data=body.encode(), headers={"Authorization": f"Basic {basic}"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        token: str = json.load(answer)["access_token"]
    return token


async def whoami(scope: Scope, receive: Receive, send: Send) -> None:
    user = scope.get("user")
    body = json.dumps({"client": user.access_token.client_id, "scopes": user.access_token.scopes}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def gateway(world: OAuthWorld, resource: str) -> httpx2.AsyncClient:
    external = ExternalTokens(OAuthResourceSettings(issuer=world.issuer, resource=resource, scopes=("mcp:read",)))
    await external.load()
    security = HttpSecurity(allowed_hosts=[HOST], external=external)
    app = SecurityMiddleware(whoami, security)
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}")


async def test_an_access_token_for_the_gateway_admits_its_subject_with_its_scopes(world: OAuthWorld) -> None:
    token = client_credentials_token(world, world.mcp_url)
    with anyio.fail_after(60):
        async with await gateway(world, world.mcp_url) as http:
            answer = await http.post("/mcp", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert answer.json() == {"client": "oauth:robot", "scopes": []}


async def test_an_access_tokens_mcpmux_scopes_are_its_scopes_on_the_rest_api(world: OAuthWorld, tmp_path: Path) -> None:
    external = ExternalTokens(OAuthResourceSettings(issuer=world.issuer, resource=world.mcp_url))
    await external.load()
    registry = SourceRegistry(f"sqlite:///{tmp_path / 'sources.db'}", key=b"k" * 32)
    store = StateStore(tmp_path / "state.db")
    security = HttpSecurity(allowed_hosts=[HOST], tokens=TokenStore(store), external=external)
    app = build_api(Config(security=SecurityConfig(pinning="off")), registry, store=store, security=security)
    reader = client_credentials_token(world, world.mcp_url, "mcpmux:read")
    plain = client_credentials_token(world, world.mcp_url, "mcp:read")
    execute = {"tool_id": "nowhere:tool", "arguments": {}}
    try:
        with TestClient(app, base_url=f"http://{HOST}") as http:
            listed = http.get("/api/sources", headers={"Authorization": f"Bearer {reader}"})
            not_allowed = http.post("/api/tools/execute", json=execute, headers={"Authorization": f"Bearer {reader}"})
            no_api_scope = http.get("/api/sources", headers={"Authorization": f"Bearer {plain}"})
    finally:
        registry.close()
        store.close()
    assert listed.status_code == 200, listed.text
    assert not_allowed.status_code == 403 and "mcpmux:execute" in not_allowed.json()["detail"]
    assert no_api_scope.status_code == 403 and "mcpmux:read" in no_api_scope.json()["detail"]


async def test_tokens_that_are_not_for_this_gateway_are_refused_with_a_pointer_to_the_metadata(
    world: OAuthWorld,
) -> None:
    token = client_credentials_token(world, world.mcp_url)  # audience: another resource than this gateway's
    with anyio.fail_after(60):
        async with await gateway(world, "https://gateway.example.com/mcp") as http:
            wrong_audience = await http.post("/mcp", headers={"Authorization": f"Bearer {token}"})
            forged = await http.post("/mcp", headers={"Authorization": f"Bearer {token[:-6]}AAAAAA"})
            missing = await http.post("/mcp")
            metadata = await http.get(f"{PRM_PATH}/mcp")
    for refused in (wrong_audience, forged, missing):
        assert refused.status_code == 401
        assert f'resource_metadata="https://{HOST}{PRM_PATH}"' in refused.headers["www-authenticate"]
    assert metadata.status_code == 200
    assert metadata.json() == {
        "resource": "https://gateway.example.com/mcp",
        "authorization_servers": [world.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp:read"],
    }


@pytest.mark.slow
async def test_mcpmux_logs_in_to_a_gateway_that_accepts_its_issuers_tokens(tmp_path: Path) -> None:
    """Both directions, real processes: ``mcpmux serve --http --oauth-issuer`` in front, mcpmux's client
    (client credentials) discovering it from the 401, oidc-provider issuing a token for the gateway."""
    port = free_port()
    gateway_url = f"http://127.0.0.1:{port}/mcp"
    with oauth_world(also_for=(gateway_url,)) as world:
        config = tmp_path / "gateway.yaml"
        config.write_text("mcp:\n  servers:\n    - name: notes\n      type: http\n      url: " + world.mcp_url + "\n")
        argv = [
            sys.executable, "-m", "mcpmux", "--config", str(config), "serve", "--http", f"127.0.0.1:{port}",
            "--oauth-issuer", world.issuer, "--oauth-resource", gateway_url,
        ]  # fmt: skip
        with run_listening(argv, port=port):
            metadata = httpx2.get(f"http://127.0.0.1:{port}{PRM_PATH}/mcp", timeout=10).json()
            assert metadata["authorization_servers"] == [world.issuer]
            auth = OAuthConfig(grant="client_credentials", client_id="robot", client_secret="robot-secret-0123456789")
            server = StreamableHttpServerConfig(name="gw", url=gateway_url, auth=auth)
            with anyio.fail_after(90):
                async with Connection(server, Settings(connect_timeout_ms=60_000)) as conn:
                    await conn.list_tools()
        assert world.as_stats()["client_credentials"] == 1
