"""A real MCP server (the SDK's ``MCPServer`` over Streamable HTTP) that checks OAuth access tokens.

It accepts only JWT access tokens of the authorization server ``ISSUER`` (argument) (signature by the
issuer's JWKS, audience = this server's resource URL, expiry), ``mcp:read`` for everything and
``mcp:write`` for the ``write_note`` tool (403 ``insufficient_scope`` otherwise: the step-up case).
It publishes its protected resource metadata (RFC 9728). ``MODE`` (argument) makes it misbehave for the attack
tests: ``ssrf`` points its metadata at a link-local address, ``ssrf-header`` its 401 header at a
private one, ``wrong-issuer`` names itself as authorization server and serves metadata claiming
another issuer, ``http-as`` names a plain-http authorization server off loopback.

Run: ``PORT=... python resource_server.py ISSUER [MODE]``.
GET /test/stats answers counters: accepted, rejected, forbidden.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import jwt
import uvicorn
from mcp.server import MCPServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PORT = int(os.environ["PORT"])
ISSUER = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "normal"
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
STATS = {"accepted": 0, "rejected": 0, "forbidden": 0}

mcp = MCPServer("notes")


@mcp.tool()
def read_note() -> str:
    """Read the note."""
    return "the note"


@mcp.tool()
def write_note(text: str) -> str:
    """Write the note (needs mcp:write)."""
    return f"saved {text}"


def _prm() -> dict[str, object]:
    servers = {"ssrf": "https://169.254.169.254/", "wrong-issuer": BASE, "http-as": "http://auth.example.com/"}
    return {
        "resource": RESOURCE,
        "authorization_servers": [servers.get(MODE, ISSUER)],
        "scopes_supported": ["mcp:read"],
        "bearer_methods_supported": ["header"],
    }


_keys: dict[str, Any] = {}


def _fetch_keys() -> None:
    with urllib.request.urlopen(f"{ISSUER}/jwks", timeout=10) as answer:
        for key in json.load(answer)["keys"]:
            _keys[key["kid"]] = jwt.PyJWK.from_dict(key)


async def _claims(token: str) -> dict[str, Any] | None:
    try:
        kid = jwt.get_unverified_header(token).get("kid", "")
        if kid not in _keys:
            await anyio.to_thread.run_sync(_fetch_keys)
        claims: dict[str, Any] = jwt.decode(
            token, _keys[kid], algorithms=["RS256"], audience=RESOURCE, issuer=ISSUER, leeway=0
        )
    except (jwt.PyJWTError, KeyError):
        return None
    return claims


async def _json(send: Send, status: int, body: object, headers: list[tuple[bytes, bytes]] = []) -> None:  # noqa: B006
    data = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


def _challenge(extra: str = "") -> list[tuple[bytes, bytes]]:
    metadata = f"{BASE}{PRM_PATH}" if MODE != "ssrf-header" else "https://10.0.0.7/.well-known/oauth-protected-resource"
    return [(b"www-authenticate", f'Bearer {extra}resource_metadata="{metadata}"'.encode())]


class TokenCheck:
    """ASGI middleware: metadata routes, then the bearer check in front of the MCP app."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in (PRM_PATH, "/.well-known/oauth-protected-resource"):
            await _json(send, 200, _prm())
            return
        if path == "/.well-known/oauth-authorization-server" and MODE == "wrong-issuer":
            await _json(send, 200, _impostor_metadata())
            return
        if path == "/test/stats":
            await _json(send, 200, STATS)
            return
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization", b"").decode()
        claims = await _claims(auth[7:]) if auth.lower().startswith("bearer ") else None
        if claims is None:
            STATS["rejected"] += 1
            await _json(send, 401, {"error": "invalid_token"}, _challenge('error="invalid_token", '))
            return
        granted = set(str(claims.get("scope", "")).split())
        body, receive = await _buffered(receive)
        needed = {"mcp:read", "mcp:write"} if b'"write_note"' in body else {"mcp:read"}
        if not needed <= granted:
            STATS["forbidden"] += 1
            wanted = " ".join(sorted(needed | granted))
            await _json(
                send,
                403,
                {"error": "insufficient_scope"},
                _challenge(f'error="insufficient_scope", scope="{wanted}", '),
            )
            return
        STATS["accepted"] += 1
        await self.app(scope, receive, send)


def _impostor_metadata() -> dict[str, object]:
    return {
        "issuer": "https://impostor.example.com",
        "authorization_endpoint": f"{BASE}/authorize",
        "token_endpoint": f"{BASE}/token",
        "registration_endpoint": f"{BASE}/register",
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    }


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    chunks: list[bytes] = []
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return b"".join(chunks), replay


if __name__ == "__main__":
    app = TokenCheck(mcp.streamable_http_app())
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning", lifespan="on")
