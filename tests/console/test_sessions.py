"""Console sessions: who may sign in with what, when a session ends, and what counts as same-origin."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpmux.console.sessions import IDLE_TIMEOUT_S, MAX_AGE_S, Sessions, same_origin
from mcpmux.policy import StateStore
from mcpmux.web.security import Gatekeeper, HttpSecurity
from mcpmux.web.tokens import TokenStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tokens(tmp_path: Path) -> TokenStore:
    return TokenStore(StateStore(tmp_path / "state.db"))


def test_the_key_signs_in_only_while_no_token_exists(tokens: TokenStore) -> None:
    sessions = Sessions(Gatekeeper(HttpSecurity(tokens=tokens)), "the-key", Clock())
    assert sessions.sign_in("wrong") is None
    session = sessions.sign_in("the-key")
    assert session is not None and session.can("admin")
    secret = tokens.create("alice", scopes=("read",))
    assert sessions.get(session.id) is None  # a token now exists: the key's session ends
    assert sessions.sign_in("the-key") is None
    reader = sessions.sign_in(secret)
    assert reader is not None and reader.who == "token:alice" and reader.can("read") and not reader.can("execute")


def test_scopes_nest_as_they_read(tokens: TokenStore) -> None:
    """admin includes execute includes read (an admin-only token was told it lacked 'read')."""
    sessions = Sessions(Gatekeeper(HttpSecurity(tokens=tokens)), None, Clock())
    expected = {("admin",): (True, True, True), ("execute",): (True, True, False), ("read",): (True, False, False)}
    for scopes, (read, execute, admin) in expected.items():
        session = sessions.sign_in(tokens.create("-".join(scopes), scopes=scopes))
        assert session is not None
        assert (session.can("read"), session.can("execute"), session.can("admin")) == (read, execute, admin), scopes


def test_sessions_expire_when_idle_or_old_and_end_with_their_token(tokens: TokenStore) -> None:
    clock = Clock()
    sessions = Sessions(Gatekeeper(HttpSecurity(tokens=tokens)), None, clock)
    secret = tokens.create("bob", scopes=("read", "execute"))
    idle = sessions.sign_in(secret)
    assert idle is not None
    clock.now += IDLE_TIMEOUT_S + 1
    assert sessions.get(idle.id) is None
    old = sessions.sign_in(secret)
    assert old is not None
    for _ in range(int(MAX_AGE_S // (IDLE_TIMEOUT_S / 2)) + 1):
        clock.now += IDLE_TIMEOUT_S / 2
        sessions.get(old.id)
    assert sessions.get(old.id) is None
    revoked = sessions.sign_in(secret)
    assert revoked is not None
    tokens.revoke("bob")
    assert sessions.get(revoked.id) is None


def test_csrf_tokens_are_per_session_and_compared_exactly(tokens: TokenStore) -> None:
    sessions = Sessions(Gatekeeper(HttpSecurity(tokens=tokens)), "k", Clock())
    one, two = sessions.sign_in("k"), sessions.sign_in("k")
    assert one is not None and two is not None and one.csrf != two.csrf
    assert one.csrf_ok(one.csrf) and not one.csrf_ok(two.csrf) and not one.csrf_ok(None) and not one.csrf_ok("")


@pytest.mark.parametrize(
    ("origin", "referer", "ok"),
    [
        ("http://127.0.0.1:8000", None, True),
        ("http://127.0.0.1:8001", None, False),
        ("http://localhost:8000", None, False),
        ("null", None, False),
        (None, "http://127.0.0.1:8000/ui/tools", True),
        (None, "http://evil.example/ui", False),
        (None, None, False),
    ],
)
def test_same_origin_means_this_very_host(origin: str | None, referer: str | None, ok: bool) -> None:
    assert same_origin("127.0.0.1:8000", "http", origin, referer) is ok


def test_a_token_bound_to_toolsets_cannot_open_the_console(tokens: TokenStore) -> None:
    # The console shows and calls everything the host serves; such a token sees only its /mcp/NAME.
    sessions = Sessions(Gatekeeper(HttpSecurity(tokens=tokens)), None, Clock())
    bound = tokens.create("team", scopes=("read", "execute", "admin"), toolsets=("clock",))
    assert sessions.sign_in(bound) is None
    free = tokens.create("ops", scopes=("read",))
    assert sessions.sign_in(free) is not None
