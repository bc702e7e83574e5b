"""``/login NAME`` in the chat: a server in needs-auth is logged in and reconnected without leaving the chat.

Real parts: oidc-provider (the authorization server) in front of an MCP server that checks its tokens
(``tests/auth/world.py``); the person is scripted (follows the redirects, signs in, consents).
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from mcpmux.agents.agent import AgentOptions, agent_session
from mcpmux.chat.render import Renderer
from mcpmux.chat.slash import ChatState, find
from mcpmux.chat.slash_handlers import UsageError
from mcpmux.chat.transcript import Transcript
from mcpmux.config.models import Config, LLMConfig, Settings, StdioServerConfig, StreamableHttpServerConfig
from mcpmux.errors import AuthRequired, OAuthError
from mcpmux.manager import ServerState
from mcpmux.policy import StateStore
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

SETTINGS = Settings(connect_timeout_ms=30_000, timeout_ms=30_000, retry_attempts=0)
DEADLINE_S = 120


@pytest.fixture(autouse=True)
def file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")


@pytest.fixture
def world() -> Iterator[OAuthWorld]:
    with oauth_world() as running:
        yield running


@pytest.fixture
async def chat(world: OAuthWorld, tmp_path: Path) -> AsyncIterator[ChatState]:
    notes = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    local = StdioServerConfig(name="local", command="mcpmux-no-such-command")
    options = AgentOptions(catalog=False, store=StateStore(tmp_path / "s.db"))
    console = Console(file=io.StringIO(), width=300, highlight=False)
    transcript = Transcript()
    renderer = Renderer(console, transcript)
    config = Config(servers=(notes, local), settings=SETTINGS)
    async with agent_session(config, None, options, renderer) as session:
        yield ChatState(session, console, renderer, transcript, LLMConfig(), browser=lambda url: person(url, world))
    assert options.store is not None
    options.store.close()


async def person(url: str, world: OAuthWorld) -> None:
    await scripted_browser(url, world)


async def run(state: ChatState, line: str) -> None:
    found = find(line)
    assert found is not None
    command, rest = found
    await command.handler(state, rest)


def state_of(chat: ChatState, name: str) -> ServerState:
    return next(s.state for s in chat.session.guard.status() if s.name == name)


def output(chat: ChatState) -> str:
    file = chat.console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


@pytest.mark.slow
async def test_login_in_the_chat_reconnects_a_server_that_needs_auth(chat: ChatState, world: OAuthWorld) -> None:
    with anyio.fail_after(DEADLINE_S):
        with pytest.raises(AuthRequired):
            await chat.session.guard.refresh("notes")
        assert state_of(chat, "notes") is ServerState.NEEDS_AUTH
        await run(chat, "/login notes")
        assert state_of(chat, "notes") is ServerState.CONNECTED
        await run(chat, "/call notes:read_note {}")
    shown = output(chat)
    assert f"To log in to notes, open:\n{world.issuer}/auth?" in shown
    assert "logged in to notes" in shown and "connected" in shown
    assert "the note" in shown
    assert world.as_stats()["authorization_code"] == 1


async def test_login_refuses_what_it_cannot_log_in_to_with_a_clear_message(chat: ChatState) -> None:
    with anyio.fail_after(DEADLINE_S):
        with pytest.raises(UsageError, match="usage: /login server"):
            await run(chat, "/login")
        with pytest.raises(UsageError, match="OAuth logins are for http and sse servers"):
            await run(chat, "/login local")


async def test_a_login_the_person_abandons_leaves_the_chat_running(chat: ChatState, world: OAuthWorld) -> None:
    async def walks_away(url: str) -> None:
        raise OAuthError("notes", world.mcp_url, "the person closed the browser")

    chat.browser = walks_away
    with anyio.fail_after(DEADLINE_S):
        with pytest.raises(OAuthError):
            await run(chat, "/login notes")
        await run(chat, "/mcp")  # the chat goes on
    assert state_of(chat, "notes") is not ServerState.CONNECTED
    assert "notes" in output(chat).split("To log in")[-1]
