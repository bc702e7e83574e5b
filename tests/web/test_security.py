"""The HTTP security middleware and the token store, in-process (raw ASGI, no sockets)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import text
from starlette.types import Message, Receive, Scope, Send

from mcpmux.errors import ConfigError
from mcpmux.policy import StateStore
from mcpmux.serve.run import http_security
from mcpmux.web.security import Admitted, Gatekeeper, HttpSecurity, Refusal, SecurityMiddleware
from mcpmux.web.slowloris import _HeadWithBody
from mcpmux.web.tokens import TokenStore, hash_token

pytestmark = pytest.mark.anyio


class Recorder:
    """An ASGI app that records what reached it."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scopes.append(scope)
        message = await receive()
        self.bodies.append(message.get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def request(app: Any, headers: dict[str, str], chunks: list[bytes] | None = None) -> int:
    scope = {
        "type": "http", "method": "POST", "path": "/mcp", "headers": [
            (k.lower().encode(), v.encode()) for k, v in headers.items()
        ],
    }  # fmt: skip
    chunks = chunks or [b""]
    pending = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return int(sent[0]["status"])


@pytest.fixture
def tokens(tmp_path: Path) -> Iterator[TokenStore]:
    with StateStore(tmp_path / "state.db") as store:
        yield TokenStore(store)


async def test_the_authorization_header_never_reaches_the_app(tokens: TokenStore) -> None:
    secret = tokens.create("ci")
    inner = Recorder()
    app = SecurityMiddleware(inner, HttpSecurity(tokens=tokens))
    assert await request(app, {"Host": "127.0.0.1:1", "Authorization": f"Bearer {secret}"}, [b"{}"]) == 200
    assert all(name != b"authorization" for name, _ in inner.scopes[0]["headers"])
    assert inner.scopes[0]["user"].display_name == "ci"
    assert inner.bodies == [b"{}"]


async def test_bodies_are_capped_whether_declared_or_chunked() -> None:
    app = SecurityMiddleware(Recorder(), HttpSecurity(max_body_bytes=10))
    assert await request(app, {"Host": "localhost:8", "Content-Length": "11"}, [b"x" * 11]) == 413
    assert await request(app, {"Host": "localhost:8"}, [b"x" * 6, b"x" * 6]) == 413
    assert await request(app, {"Host": "localhost:8"}, [b"x" * 5, b"x" * 5]) == 200


async def test_host_and_origin_are_checked_before_anything_else() -> None:
    app = SecurityMiddleware(Recorder(), HttpSecurity())
    assert await request(app, {"Host": "attacker.example:80"}) == 421
    assert await request(app, {"Host": "127.0.0.1:9", "Origin": "https://attacker.example"}) == 403
    assert await request(app, {"Host": "127.0.0.1:9", "Origin": "http://127.0.0.1:5173"}) == 200
    assert await request(app, {}) == 421
    assert await request(app, {"Host": "localhost", "Origin": "http://[::1]"}) == 200
    assert await request(app, {"Host": "localhost.attacker.example"}) == 421


def test_tokens_are_stored_hashed_listed_by_name_and_revocable(tokens: TokenStore) -> None:
    secret = tokens.create("alice")
    assert tokens.verify(secret) == "alice" and tokens.verify(secret + "x") is None
    with tokens.store.read() as db:
        assert [tuple(r) for r in db.execute(text("SELECT hash FROM mcpmux_gateway_tokens"))] == [(hash_token(secret),)]
    with pytest.raises(ConfigError, match="exists"):
        tokens.create("alice")
    assert [t.name for t in tokens.list()] == ["alice"]
    assert tokens.revoke("alice") and not tokens.revoke("alice")
    assert tokens.verify(secret) is None


def test_off_loopback_needs_a_token_and_on_loopback_tokens_apply_once_they_exist(tokens: TokenStore) -> None:
    with pytest.raises(ConfigError, match="without auth"):
        http_security("0.0.0.0", tokens)
    local = Gatekeeper(http_security("127.0.0.1", tokens))
    assert not local.tokens_required()
    tokens.create("ops")
    assert local.tokens_required()
    public = http_security("10.1.2.3", tokens)
    assert public.require_token and "10.1.2.3:*" in public.allowed_hosts
    assert Gatekeeper(http_security("fd00::1", tokens)).check_address("[fd00::1]:8", None) is None


def test_a_token_made_or_revoked_through_another_store_counts_at_the_next_check(tmp_path: Path) -> None:
    # Two stores on one file stand for ``mcpmux token create`` in another process.
    with StateStore(tmp_path / "state.db") as serving, StateStore(tmp_path / "state.db") as cli:
        gate = Gatekeeper(HttpSecurity(tokens=TokenStore(serving)))
        assert not gate.tokens_required()
        secret = TokenStore(cli).create("late")
        assert gate.tokens_required() and (found := gate.identify(secret)) is not None and found.name == "late"
        TokenStore(cli).revoke("late")
        assert gate.identify(secret) is None and not gate.tokens_required()


def test_the_websocket_face_off_loopback_follows_the_http_rule_and_names_its_option(tokens: TokenStore) -> None:
    with pytest.raises(ConfigError, match="--ws"):
        http_security("0.0.0.0", tokens, option="--ws")
    tokens.create("ops")
    assert http_security("0.0.0.0", tokens, option="--ws").require_token


def test_a_websocket_handshake_is_checked_origin_first_then_host_then_token(tokens: TokenStore) -> None:
    secret = tokens.create("ci")
    gate = Gatekeeper(HttpSecurity(tokens=tokens))
    evil = {"host": "evil.example", "origin": "https://evil.example", "authorization": f"Bearer {secret}"}
    assert gate.admit(evil) == Refusal(403, "Invalid Origin header")
    assert gate.admit({**evil, "origin": "http://localhost:3000"}) == Refusal(421, "Invalid Host header")
    local = {"host": "127.0.0.1:9"}
    assert gate.admit(local) == Refusal(401, "A valid bearer token is required")
    admitted_as = Admitted("ci", secret, api_scopes=("execute", "read"))  # what it may do: its default scopes
    assert gate.admit({**local, "sec-websocket-protocol": f"mcp, mcpmux.bearer.{secret}"}) == admitted_as
    admitted = gate.admit({**local, "authorization": f"bearer {secret}"})
    assert isinstance(admitted, Admitted)
    still_valid = gate.still_valid(admitted)
    assert still_valid is not None and anyio.run(still_valid)
    tokens.revoke("ci")
    assert not anyio.run(still_valid)


def test_malformed_allow_rules_are_a_config_error(tokens: TokenStore) -> None:
    with pytest.raises(ConfigError, match="allow-host"):
        http_security("127.0.0.1", tokens, allow_hosts=["user@host"])
    with pytest.raises(ConfigError, match="allow-origin"):
        http_security("127.0.0.1", tokens, allow_origins=["https://example.com/path"])


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def test_a_fixed_length_response_goes_out_in_one_write_with_its_head() -> None:
    transport = _Transport()
    writer = _HeadWithBody(transport)  # type: ignore[arg-type]
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    assert transport.writes == []
    writer.write(b"{}")
    assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


def test_a_streamed_response_head_is_not_held_and_a_held_head_is_flushed_on_close() -> None:
    streamed = _Transport()
    writer = _HeadWithBody(streamed)  # type: ignore[arg-type]
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    writer.write(b"5\r\nhello\r\n")
    assert len(streamed.writes) == 2
    cut = _Transport()
    writer = _HeadWithBody(cut)  # type: ignore[arg-type]
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    writer.close()
    assert cut.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"] and cut.closed
