"""Attacks on the gateway's JWT checks: tokens signed with the trusted issuer's own key whose claims have
shapes RFC 7519 does not allow.

The issuer is a real HTTP server on 127.0.0.1 publishing its metadata and JWKS; the gateway's security
middleware loads them as it does in ``mcpmux serve --http --oauth-issuer``. Every token below carries a
valid signature, issuer, audience and expiry; only the claim under attack is wrong, and each one is
refused with 401. (PyJWT alone converts ``exp`` with ``int()``, so ``"exp": "9999999999"`` passed, and
an empty ``sub`` named the caller ``oauth:``.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.types import Receive, Scope, Send

from mcpmux.web.oauth_resource import ExternalTokens, OAuthResourceSettings
from mcpmux.web.security import HttpSecurity, SecurityMiddleware
from tests.peers.fixtures import http_thread

pytestmark = [pytest.mark.anyio, pytest.mark.network]

HOST = "gateway.test"
RESOURCE = f"https://{HOST}/mcp"
KID = "attack-key"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
DEADLINE_S = 60


class Issuer(BaseHTTPRequestHandler):
    """The authorization server's metadata and keys, as any issuer publishes them."""

    def do_GET(self) -> None:
        issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key())), "kid": KID, "use": "sig"}
        documents = {
            "/.well-known/oauth-authorization-server": {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"},
            "/jwks": {"keys": [jwk]},
        }
        body = json.dumps(documents.get(self.path, {})).encode()
        self.send_response(200 if self.path in documents else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no request log in the test output


@pytest.fixture(scope="module")
def issuer() -> Iterator[str]:
    with http_thread(Issuer) as port:
        yield f"http://127.0.0.1:{port}"


def signed(issuer: str, **claims: Any) -> str:
    """A token of ``issuer`` for the gateway: valid claims, then ``claims`` over them (``None`` drops one)."""
    now = int(time.time())
    body: dict[str, Any] = {"iss": issuer, "aud": RESOURCE, "sub": "alice", "exp": now + 300, "iat": now}
    body.update(claims)
    body = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(body, KEY, algorithm="RS256", headers={"kid": KID})


async def whoami(scope: Scope, receive: Receive, send: Send) -> None:
    body = json.dumps({"client": scope["user"].access_token.client_id}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def answers(issuer: str, tokens: list[str]) -> list[httpx2.Response]:
    external = ExternalTokens(OAuthResourceSettings(issuer=issuer, resource=RESOURCE))
    app = SecurityMiddleware(whoami, HttpSecurity(allowed_hosts=[HOST], external=external))
    with anyio.fail_after(DEADLINE_S):
        await external.load()
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}") as http:
            return [await http.post("/mcp", headers={"Authorization": f"Bearer {token}"}) for token in tokens]


async def test_a_well_formed_token_of_the_issuer_is_admitted(issuer: str) -> None:
    (answer,) = await answers(issuer, [signed(issuer)])
    assert answer.status_code == 200 and answer.json() == {"client": "oauth:alice"}


FAR = int(time.time()) + 10**6
MALFORMED = {
    "exp as a string": {"exp": str(FAR)},
    "exp as a boolean": {"exp": True},
    "exp as a list": {"exp": [FAR]},
    "nbf as a string": {"nbf": "0"},
    "iat as a string": {"iat": "0"},
    "no sub": {"sub": None},
    "empty sub": {"sub": ""},
    "blank sub": {"sub": "   "},
    "sub as a number": {"sub": 42},
    "sub with a control character": {"sub": "alice\nadmin"},
    "scope as a list": {"scope": ["mcpmux:admin"]},
    "scp with a non-string": {"scp": ["mcpmux:read", {"admin": True}]},
}


@pytest.mark.parametrize("claims", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_signed_token_with_a_malformed_claim_is_refused(issuer: str, claims: dict[str, Any]) -> None:
    (answer,) = await answers(issuer, [signed(issuer, **claims)])
    assert answer.status_code == 401, answer.text
