"""OAuth 2.1 against a real authorization server (oidc-provider) in front of a real token-checking MCP server.

The person is scripted (:func:`~tests.auth.world.scripted_browser`: follows the redirects, signs in,
consents); everything else is the real protocol on 127.0.0.1: discovery, dynamic registration, code
+ PKCE, resource indicators, JWT access tokens checked by the MCP server, refresh with rotation,
revocation, step-up, client credentials.
"""

from __future__ import annotations

import contextlib
import logging
import stat
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator

import anyio
import mcp_types as types
import pytest

from mcpmux.auth.login import login
from mcpmux.auth.vault import FileVault, auth_dir, open_vault
from mcpmux.config.models import Config, OAuthConfig, Settings, StreamableHttpServerConfig
from mcpmux.errors import AuthRequired
from mcpmux.manager import Manager, ServerState
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

SETTINGS = Settings(connect_timeout_ms=30_000, timeout_ms=30_000, retry_attempts=0)
DEADLINE_S = 90


@pytest.fixture(autouse=True)
def file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")


@pytest.fixture
def world() -> Iterator[OAuthWorld]:
    with oauth_world() as running:
        yield running


@pytest.fixture
def short_world() -> Iterator[OAuthWorld]:
    with oauth_world(access_ttl_s=2) as running:
        yield running


def notes(world: OAuthWorld, auth: OAuthConfig | None = None) -> StreamableHttpServerConfig:
    return StreamableHttpServerConfig(name="notes", url=world.mcp_url, auth=auth)


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def person_logs_in(world: OAuthWorld, server: StreamableHttpServerConfig | None = None) -> None:
    await login(server or notes(world), open_vault(), browser=lambda url: scripted_browser(url, world))


@contextlib.asynccontextmanager
async def manager(server: StreamableHttpServerConfig) -> AsyncIterator[Manager]:
    async with Manager(Config(servers=(server,), settings=SETTINGS), catalog=False, start=False) as mux:
        await mux.refresh(server.name)
        yield mux


async def test_login_registers_once_and_every_call_carries_a_token_the_server_accepts(world: OAuthWorld) -> None:
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
        async with manager(notes(world)) as mux:
            assert await mux.call_tool("notes:read_note", {}) is not None
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"
        await person_logs_in(world)  # a second login reuses the registration
    stats = world.as_stats()
    assert stats["registrations"] == 1
    assert stats["authorization_code"] == 2
    first = world.visited[0]
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(first).query)
    assert query["code_challenge_method"] == ["S256"]
    assert query["resource"] == [world.mcp_url]
    assert query["redirect_uri"][0].startswith("http://127.0.0.1:")


async def test_the_token_file_is_private_and_encrypted(world: OAuthWorld) -> None:
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
    record = FileVault(auth_dir()).load("notes")
    assert record is not None
    assert record.tokens is not None
    path = auth_dir() / "notes.token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((auth_dir() / ".key").stat().st_mode) == 0o600
    blob = path.read_bytes()
    assert record.tokens.access_token.encode() not in blob
    assert record.tokens.refresh_token is not None
    assert record.tokens.refresh_token.encode() not in blob


@pytest.mark.slow
async def test_an_expiring_token_is_refreshed_and_the_rotated_refresh_token_is_kept(short_world: OAuthWorld) -> None:
    world = short_world
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
        first = open_vault().load("notes")
        assert first is not None
        assert first.tokens is not None
        async with manager(notes(world)) as mux:
            for _ in range(3):
                assert text(await mux.call_tool("notes:read_note", {})) == "the note"
                await anyio.sleep(2.2)  # past the access token's 2 s lifetime
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"
    later = open_vault().load("notes")
    assert later is not None
    assert later.tokens is not None
    assert later.tokens.refresh_token != first.tokens.refresh_token  # rotated, and the new one kept
    stats = world.as_stats()
    assert stats["refresh_token"] >= 3
    assert stats["reuse"] == 0
    assert stats["authorization_code"] == 1  # no second login


@pytest.mark.slow
async def test_a_revoked_login_leaves_the_server_needing_auth_with_a_login_hint(short_world: OAuthWorld) -> None:
    world = short_world
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
        record = open_vault().load("notes")
        assert record is not None
        assert record.tokens is not None
        assert record.client is not None
        revoke(world, str(record.tokens.refresh_token), str(record.client["client_id"]))
        await anyio.sleep(2.2)  # the access token expires; its refresh is refused now
        async with Manager(Config(servers=(notes(world),), settings=SETTINGS), catalog=False, start=False) as mux:
            with pytest.raises(AuthRequired) as caught:
                await mux.refresh("notes")
            assert mux.status()[0].state is ServerState.NEEDS_AUTH
    assert "mcpmux login notes" in str(caught.value.hint)
    after = open_vault().load("notes")
    assert after is not None
    assert after.tokens is None  # the dead tokens are dropped ...
    assert after.client == record.client  # ... the registration is kept for the next login


def revoke(world: OAuthWorld, token: str, client_id: str) -> None:
    body = urllib.parse.urlencode({"token": token, "client_id": client_id}).encode()
    request = urllib.request.Request(f"{world.issuer}/token/revocation", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


async def test_a_403_insufficient_scope_is_remembered_and_the_next_login_asks_the_union(world: OAuthWorld) -> None:
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
        async with manager(notes(world)) as mux:
            with pytest.raises(AuthRequired):
                await mux.call_tool("notes:write_note", {"text": "hi"})
        record = open_vault().load("notes")
        assert record is not None
        assert set(str(record.wanted_scope).split()) >= {"mcp:read", "mcp:write"}
        await person_logs_in(world)
        scope = urllib.parse.parse_qs(urllib.parse.urlsplit(world.visited[-1]).query)["scope"][0].split()
        assert {"mcp:read", "mcp:write"} <= set(scope)
        async with manager(notes(world)) as mux:
            assert text(await mux.call_tool("notes:write_note", {"text": "hi"})) == "saved hi"
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"  # the union kept read
    # oidc-provider binds a registered client to the scopes it registered with: mcpmux registers
    # without naming scopes, so the step-up needs no second registration (no orphaned client).
    assert world.as_stats()["registrations"] == 1


async def test_client_credentials_from_config_need_no_person(world: OAuthWorld) -> None:
    auth = OAuthConfig(
        grant="client_credentials", client_id="robot", client_secret="robot-secret-0123456789", issuer=world.issuer
    )
    with anyio.fail_after(DEADLINE_S):
        async with manager(notes(world, auth)) as mux:
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"
    stats = world.as_stats()
    assert stats["client_credentials"] == 1
    assert stats["authorization_code"] == 0


@pytest.mark.slow
async def test_no_token_or_secret_reaches_the_logs(short_world: OAuthWorld, caplog: pytest.LogCaptureFixture) -> None:
    world = short_world
    caplog.set_level(logging.DEBUG)
    with anyio.fail_after(DEADLINE_S):
        await person_logs_in(world)
        async with manager(notes(world)) as mux:
            await mux.call_tool("notes:read_note", {})
            await anyio.sleep(2.2)
            await mux.call_tool("notes:read_note", {})
    record = open_vault().load("notes")
    assert record is not None
    assert record.tokens is not None
    secrets = [record.tokens.access_token, str(record.tokens.refresh_token)]
    shown = caplog.text + repr(record) + str(record.describe())
    assert not [secret for secret in secrets if secret in shown]


@pytest.fixture
def person_at_hand(world: OAuthWorld) -> Iterator[None]:
    from mcpmux.auth.attach import enable_interactive_login

    enable_interactive_login(lambda url: scripted_browser(url, world))
    try:
        yield
    finally:
        enable_interactive_login(None)


@pytest.mark.usefixtures("person_at_hand")
async def test_a_face_with_a_person_at_hand_logs_in_and_steps_up_inside_the_session(world: OAuthWorld) -> None:
    with anyio.fail_after(DEADLINE_S):
        async with manager(notes(world)) as mux:  # no login yet: the first 401 starts one
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"
            # 403 insufficient_scope mid-session: one step-up login from that answer, then the retry
            assert text(await mux.call_tool("notes:write_note", {"text": "up"})) == "saved up"
            assert text(await mux.call_tool("notes:read_note", {})) == "the note"
    # login, then one step-up: the registration named no scopes, so oidc-provider allows the wider one
    # for the same client (before, it refused it and a second registration was made)
    assert len(world.visited) == 2
    assert world.as_stats()["registrations"] == 1
    assert world.rs_stats()["forbidden"] == 1
