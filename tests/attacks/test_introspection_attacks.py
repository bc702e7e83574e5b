"""Attacks on the gateway as a resource server of opaque tokens (introspection, RFC 7662; groups).

Forged and expired tokens, an introspection endpoint that is down or refuses the gateway (fail
closed, 503 not 401), a configured or discovered endpoint aimed at a private address (SSRF), tokens
in logs, hostile introspection answers, a cache flood, and a client that names itself into a group.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import jwt
import mcp_types as types
import pytest

from mcpmux.config.models import ApprovalRule, SecurityConfig
from mcpmux.errors import OAuthError
from mcpmux.policy import StateStore
from mcpmux.policy.callers import Caller, matching_caller
from mcpmux.policy.rules import Rules
from mcpmux.types.models import ToolInfo
from mcpmux.web import introspection
from mcpmux.web.introspection import IntrospectionSettings, Introspector, _problem
from mcpmux.web.security import HttpSecurity, SecurityMiddleware
from mcpmux.web.tokens import TokenStore
from tests.auth.world import OAuthWorld, oauth_world
from tests.peers.fixtures import free_port
from tests.web.test_oauth_introspection import (
    DEADLINE_S,
    GATEWAY,
    GATEWAY_SECRET,
    HOST,
    bearer,
    client_of,
    introspecting,
    token_of,
    whoami,
)

pytestmark = [pytest.mark.anyio]

NOW = int(time.time())


@pytest.fixture
def world() -> Iterator[OAuthWorld]:
    with oauth_world(also_for=(GATEWAY,), opaque=True) as running:
        yield running


@pytest.mark.parametrize("forged", ["random-opaque-string", "a" * 4000, "Bearer Bearer", "x.y.z"])
@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_forged_tokens_are_refused_with_401_and_a_forged_jwt_is_never_introspected(
    world: OAuthWorld, forged: str
) -> None:
    external = introspecting(world)
    unsigned = jwt.encode({"sub": "admin", "aud": GATEWAY, "iss": world.issuer, "exp": NOW}, "k" * 32)
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            answer = await http.post("/mcp", headers=bearer(forged))
            calls = external.introspection.calls if external.introspection else -1
            as_jwt = await http.post("/mcp", headers=bearer(unsigned))
    assert answer.status_code == 401
    assert as_jwt.status_code == 401
    assert external.introspection is not None and external.introspection.calls == calls  # the JWT was not sent


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_an_introspection_endpoint_that_is_down_fails_closed_with_503_not_401(world: OAuthWorld) -> None:
    dead = f"http://127.0.0.1:{free_port()}/introspect"  # nothing listens there
    external = introspecting(world, endpoint=dead)
    token = token_of(world, "robot")
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            answer = await http.post("/mcp", headers=bearer(token))
            api = await http.get("/api/servers", headers=bearer(token))
    assert answer.status_code == 503 and answer.headers["retry-after"]
    assert "could not be reached" in answer.text
    assert api.status_code == 503 and api.json()["status"] == 503  # a problem document under /api


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_an_authorization_server_refusing_the_gateways_credentials_fails_closed(world: OAuthWorld) -> None:
    external = introspecting(world)
    assert external.introspection is not None
    external.introspection.settings = IntrospectionSettings("gateway", "wrong-secret")
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with client_of(external) as http:
            answer = await http.post("/mcp", headers=bearer(token_of(world, "robot")))
    assert answer.status_code == 503


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://10.1.2.3/introspect", "private"),
        ("http://introspection.example.com/introspect", "only https"),
        ("file:///etc/passwd", "only https"),
    ],
)
async def test_an_introspection_endpoint_on_a_private_address_or_without_https_is_refused(
    endpoint: str, said: str
) -> None:
    settings = IntrospectionSettings("gateway", GATEWAY_SECRET, endpoint=endpoint)
    introspector = Introspector(settings, issuer="https://issuer.example.com", resource=GATEWAY)
    with pytest.raises(OAuthError) as refused:
        await introspector.start()
    assert said in str(refused.value) or "private" in str(refused.value)
    assert introspector.endpoint is None


async def test_metadata_naming_a_private_introspection_endpoint_is_refused() -> None:
    introspector = Introspector(
        IntrospectionSettings("gateway", "s"), issuer="https://issuer.example.com", resource=GATEWAY
    )
    with pytest.raises(OAuthError, match="SSRF"):
        await introspector.start({"introspection_endpoint": "https://192.168.1.1/introspect"})
    with pytest.raises(OAuthError, match="no introspection_endpoint"):
        await introspector.start({})


async def test_a_private_endpoint_is_allowed_only_when_configured() -> None:
    settings = IntrospectionSettings("gateway", "s", endpoint="https://10.1.2.3/introspect", allow_private=True)
    introspector = Introspector(settings, issuer="https://issuer.example.com", resource=GATEWAY)
    await introspector.start()
    assert introspector.endpoint == "https://10.1.2.3/introspect"


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.subprocess
def test_serve_refuses_to_start_with_an_ssrf_introspection_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.setenv("MCPMUX_OAUTH_CLIENT_SECRET", GATEWAY_SECRET)
    argv = [
        sys.executable, "-m", "mcpmux", "serve", "--http", f"127.0.0.1:{free_port()}",
        "--oauth-issuer", "https://issuer.example.com", "--oauth-resource", GATEWAY, "--oauth-client-id", "gateway",
        "--oauth-introspection", "https://169.254.169.254/introspect",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert "169.254.169.254" in done.stderr and "Traceback" not in done.stderr
    missing = subprocess.run(
        argv[:-2], capture_output=True, text=True, timeout=120, check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/"}
    )
    assert missing.returncode == 2 and "MCPMUX_OAUTH_CLIENT_SECRET" in missing.stderr


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_no_token_and_no_client_secret_reaches_a_log_line(
    world: OAuthWorld, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    good, other = token_of(world, "robot"), token_of(world, "robot", resource=world.mcp_url)
    forged = "forged-opaque-token-value-1234567890"
    external = introspecting(world)
    down = introspecting(world, endpoint=f"http://127.0.0.1:{free_port()}/introspect")
    with anyio.fail_after(DEADLINE_S):
        for gateway in (external, down):
            await gateway.load()
            async with client_of(gateway) as http:
                for token in (good, other, forged):
                    await http.post("/mcp", headers=bearer(token))
    logged = "\n".join(f"{record.getMessage()} {record.args}" for record in caplog.records)
    assert "failed" in logged and "refused" in logged  # the failures were logged, by hash only
    for secret in (good, other, forged, GATEWAY_SECRET):
        assert secret not in logged


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"active": "true", "aud": GATEWAY, "sub": "a"}, "not active"),
        ({"active": True, "sub": "a"}, "audience"),
        ({"active": True, "aud": [GATEWAY + "/other"], "sub": "a"}, "audience"),
        ({"active": True, "aud": GATEWAY, "sub": "a", "iss": "https://evil.example.com"}, "issued by"),
        ({"active": True, "aud": GATEWAY, "sub": "a", "exp": NOW - 3600}, "expired"),
        ({"active": True, "aud": GATEWAY, "sub": "a", "nbf": 4_000_000_000}, "not valid yet"),
        ({"active": True, "aud": GATEWAY, "sub": "a", "token_type": "refresh_token"}, "refresh token"),
        ({"active": True, "aud": GATEWAY}, "neither sub"),
    ],
)
def test_hostile_or_unfit_introspection_answers_are_refused(answer: dict[str, object], why: str) -> None:
    assert why in (_problem(answer, "https://issuer.example.com", GATEWAY) or "")


def test_a_flood_of_distinct_tokens_cannot_grow_the_cache_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(introspection, "MAX_ENTRIES", 50)
    introspector = Introspector(IntrospectionSettings("gateway", "s"), issuer="https://i.example.com", resource=GATEWAY)
    for index in range(500):
        introspector._remember(f"key-{index}", None)
    assert len(introspector._cache) <= 50


def test_a_client_naming_itself_into_a_group_is_in_no_group() -> None:
    """Groups come only from a verified token (:class:`Caller`), never from a caller's text."""
    rule = ApprovalRule(tools="time:*", callers=("group:admins",), action="allow")
    rules = Rules(SecurityConfig(require_approval=True, approval_rules=(rule,)), {})
    tool = ToolInfo("time:now", "time", types.Tool(name="now", input_schema={"type": "object"}))
    impostor = "token:oauth:eve (groups: admins)"
    assert matching_caller(impostor, rule.callers) is None
    assert rules.call(tool, {}, impostor).action == "ask"
    assert rules.call(tool, {}, Caller("token:oauth:alice", ["admins"])).action == "allow"
    assert rules.call(tool, {}, None).action == "ask"


async def test_a_pending_introspection_that_never_ends_does_not_hang_other_requests_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(introspection, "TIMEOUT_S", 0.05)
    introspector = Introspector(IntrospectionSettings("gateway", "s"), issuer="https://i.example.com", resource=GATEWAY)
    key = introspection.token_digest("t")
    introspector._pending[key] = anyio.Event()  # someone else's request that never finishes
    with anyio.fail_after(10):
        await introspector.introspect("t")
    assert introspector.claims("t") is None


@pytest.mark.peers
@pytest.mark.subprocess
@pytest.mark.network
async def test_the_gateways_own_tokens_are_never_sent_to_the_introspection_endpoint(
    world: OAuthWorld, tmp_path: Path
) -> None:
    store = StateStore(tmp_path / "state.db")
    try:
        tokens = TokenStore(store)
        ours = tokens.create("ci")
        revoked = tokens.create("gone")
        tokens.revoke("gone")
        external = introspecting(world)
        app = SecurityMiddleware(whoami, HttpSecurity(allowed_hosts=[HOST], tokens=tokens, external=external))
        with anyio.fail_after(DEADLINE_S):
            await external.load()
            async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}") as http:
                admitted = await http.post("/mcp", headers=bearer(ours))
                refused = await http.post("/mcp", headers=bearer(revoked))
                forged = await http.post("/mcp", headers=bearer("mcpmux_" + "A" * 43))
    finally:
        store.close()
    assert admitted.status_code == 200 and admitted.json()["caller"] == "ci"
    assert refused.status_code == 401 and forged.status_code == 401
    assert external.introspection is not None and external.introspection.calls == 0
