"""Attacks on mcpmux's OAuth client, acted out against real servers on 127.0.0.1.

A hostile MCP server (or one whose metadata was tampered with) tries to make mcpmux fetch internal
URLs (SSRF: a cloud metadata address, a private host), talk plain http to an authorization server off
loopback, accept metadata of another issuer, or a forged redirect; and a token must never travel to
another origin than the server it was issued for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import httpx2
import pytest

from mcpmux.auth.broker import BrokeredAuth, TokenBroker
from mcpmux.auth.login import login
from mcpmux.auth.netguard import UrlPolicy
from mcpmux.auth.vault import AuthRecord, TokenSet, open_vault
from mcpmux.config.models import StreamableHttpServerConfig
from mcpmux.errors import OAuthError
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio]


def real(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Marks a test that runs the real authorization and resource servers."""
    return pytest.mark.peers(pytest.mark.subprocess(pytest.mark.network(test)))


DEADLINE_S = 60


@pytest.fixture(autouse=True)
def file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")


async def attempt_login(world: OAuthWorld) -> OAuthError:
    server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    with anyio.fail_after(DEADLINE_S), pytest.raises(OAuthError) as caught:
        await login(server, open_vault(), browser=lambda url: scripted_browser(url, world))
    assert not world.visited, "no person may be sent anywhere by a refused flow"
    return caught.value


@real
@pytest.mark.parametrize(("mode", "target"), [("ssrf", "169.254.169.254"), ("ssrf-header", "10.0.0.7")])
async def test_metadata_pointing_at_a_private_or_link_local_address_is_refused(mode: str, target: str) -> None:
    with oauth_world(mode) as world:
        error = await attempt_login(world)
        assert target in str(error)
        assert "SSRF guard" in str(error)
        assert "allow_private_addresses" in str(error.hint)


@real
async def test_an_authorization_server_on_plain_http_off_loopback_is_refused() -> None:
    with oauth_world("http-as") as world:
        error = await attempt_login(world)
        assert "only https is allowed" in str(error)
        assert "auth.example.com" in str(error)


@real
async def test_metadata_naming_another_issuer_is_refused() -> None:
    with oauth_world("wrong-issuer") as world:
        error = await attempt_login(world)
        assert "issuer mismatch" in str(error)
        assert "impostor.example.com" in str(error)


@real
async def test_a_forged_redirect_with_another_state_is_refused() -> None:
    """A page the person visits fires the loopback redirect with an attacker's code (login CSRF)."""
    with oauth_world("normal") as world:
        server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)

        async def attacker(url: str) -> None:
            redirect = httpx2.URL(url).params["redirect_uri"]
            async with httpx2.AsyncClient() as browser:
                await browser.get(redirect, params={"code": "attacker-code", "state": "forged"})

        with anyio.fail_after(DEADLINE_S), pytest.raises(OAuthError) as caught:
            await login(server, open_vault(), browser=attacker)
        assert "State parameter mismatch" in str(caught.value)
        record = open_vault().load("notes")
        assert record is None or record.tokens is None
        assert world.as_stats()["authorization_code"] == 0  # the attacker's code never reached the token endpoint


async def test_the_token_is_never_sent_to_another_origin() -> None:
    vault = open_vault()
    tokens = TokenSet(access_token="secret-access-token-xyz", expires_at=None)
    vault.save(AuthRecord(server="notes", resource="https://mcp.example.com/mcp", tokens=tokens))
    broker = TokenBroker("notes", "https://mcp.example.com/mcp", vault, UrlPolicy("notes", "mcp.example.com"))
    seen: dict[str, str | None] = {}

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen[str(request.url)] = request.headers.get("authorization")
        return httpx2.Response(200)

    async with httpx2.AsyncClient(auth=BrokeredAuth(broker), transport=httpx2.MockTransport(answer)) as http:
        for url in (
            "https://mcp.example.com/mcp",
            "https://evil.example.com/mcp",
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
        ):
            await http.post(url)
    assert seen == {
        "https://mcp.example.com/mcp": "Bearer secret-access-token-xyz",
        "https://evil.example.com/mcp": None,
        "http://mcp.example.com/mcp": None,
        "https://mcp.example.com:8443/mcp": None,
    }


async def test_a_login_stored_for_another_origin_is_not_used_when_the_url_changes() -> None:
    vault = open_vault()
    tokens = TokenSet(access_token="token-for-the-old-host", expires_at=None)
    vault.save(AuthRecord(server="notes", resource="https://old.example.com/mcp", tokens=tokens))
    broker = TokenBroker("notes", "https://new.example.net/mcp", vault, UrlPolicy("notes", "new.example.net"))
    assert await broker.token() is None
