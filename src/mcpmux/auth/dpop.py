"""DPoP (RFC 9449): sender-constrained tokens, used where the authorization server offers them.

A login where the resource server asks for DPoP (its 401 challenges with the ``DPoP`` scheme, or its
protected resource metadata says ``dpop_bound_access_tokens_required``) and the authorization server
advertises ``dpop_signing_alg_values_supported`` with ES256 makes a P-256 key, proves possession
of it on every token request (the ``DPoP`` header), and gets a token
bound to it; the key is kept in the server's record beside the token (the vault is encrypted), so
every mcpmux process of the machine can use the token. Each MCP request then carries
``Authorization: DPoP <token>`` and a fresh proof naming the method, the URL and the token's hash.
A server (or authorization server) that wants a nonce says ``use_dpop_nonce`` with a ``DPoP-Nonce``
header: the request is sent once more with a new proof carrying it, and the nonce is kept for the
next ones.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from typing import Final

import httpx2
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

__all__ = ["ALGORITHM", "DPoPKey", "DPoPTokenTransport", "asks_for_nonce", "challenges_with_dpop", "htu"]

ALGORITHM: Final = "ES256"
NONCE_HEADER: Final = "DPoP-Nonce"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: httpx2.URL | str) -> str:
    """The ``htu`` of a request URL: without query and fragment (RFC 9449 section 4.2)."""
    return str(httpx2.URL(str(url)).copy_with(query=None, fragment=None))


def asks_for_nonce(response: httpx2.Response, body: bytes = b"") -> str | None:
    """The nonce a ``use_dpop_nonce`` answer asks for (401 challenge or 400 token error), else ``None``."""
    nonce = response.headers.get(NONCE_HEADER)
    if not nonce:
        return None
    if response.status_code == 401 and "use_dpop_nonce" in response.headers.get("WWW-Authenticate", ""):
        return nonce
    if response.status_code == 400 and b"use_dpop_nonce" in body:
        return nonce
    return None


class DPoPKey:
    """One P-256 key and the nonces servers gave for it (by origin)."""

    def __init__(self, key: ec.EllipticCurvePrivateKey) -> None:
        self._key = key
        numbers = key.public_key().public_numbers()
        self.jwk = {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(numbers.x.to_bytes(32, "big")),
            "y": _b64(numbers.y.to_bytes(32, "big")),
        }
        self.nonces: dict[str, str] = {}

    @classmethod
    def generate(cls) -> DPoPKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem(cls, pem: str) -> DPoPKey:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
            raise ValueError("the stored DPoP key is not a P-256 key")
        return cls(key)

    def to_pem(self) -> str:
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    def __repr__(self) -> str:
        return "DPoPKey(P-256)"

    @property
    def thumbprint(self) -> str:
        """The key's JWK SHA-256 thumbprint (RFC 7638), the ``jkt`` a bound token names."""
        canonical = json.dumps(self.jwk, separators=(",", ":"), sort_keys=True).encode()
        return _b64(hashlib.sha256(canonical).digest())

    def proof(self, method: str, url: httpx2.URL | str, *, access_token: str | None = None) -> str:
        """A fresh proof (new ``jti``, current ``iat``) for one request, with the origin's nonce if any."""
        target = htu(url)
        claims: dict[str, object] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": target,
            "iat": int(time.time()),
        }
        nonce = self.nonces.get(_origin(target))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.encode("ascii")).digest())
        header = {"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.jwk}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        der = self._key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def remember_nonce(self, url: httpx2.URL | str, nonce: str) -> None:
        self.nonces[_origin(htu(url))] = nonce


def _origin(url: str) -> str:
    parsed = httpx2.URL(url)
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii')}"


def _is_token_request(request: httpx2.Request, body: bytes) -> bool:
    form = request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
    return request.method == "POST" and form and b"grant_type=" in body


def challenges_with_dpop(response: httpx2.Response) -> bool:
    """Whether a 401 challenges with the ``DPoP`` scheme (RFC 9449 section 7.1)."""
    challenge = response.headers.get("WWW-Authenticate", "")
    return response.status_code == 401 and re.search(r"(^|,)\s*dpop(\s|$)", challenge, re.IGNORECASE) is not None


def _metadata(request: httpx2.Request, response: httpx2.Response, body: bytes) -> dict[str, object]:
    if "/.well-known/" not in request.url.path or response.status_code != 200:
        return {}
    try:
        metadata = json.loads(body)
    except ValueError:
        return {}
    return metadata if isinstance(metadata, dict) else {}


class DPoPTokenTransport(httpx2.AsyncBaseTransport):
    """The login's transport: DPoP proofs on token requests once the authorization server offers DPoP.

    It watches the resource server's answers and the metadata go by; once the resource server asks
    for DPoP and the authorization server offers it, every token request carries a proof (retried
    once with the nonce a ``use_dpop_nonce`` answer gives). A token answer of type
    ``DPoP`` is recorded in :attr:`bound` and handed to the SDK's client, which knows only ``Bearer``,
    as ``Bearer``: the record keeps the real type, and the broker presents it as DPoP.
    """

    def __init__(
        self, inner: httpx2.AsyncBaseTransport, key: DPoPKey, *, enabled: bool | None = None, asked: bool = False
    ) -> None:
        self._inner, self.key = inner, key
        self._forced = enabled
        self.asked = asked  # the resource server asked for DPoP
        self.offered = False  # the authorization server offers DPoP with ES256
        self.bound = False

    @property
    def active(self) -> bool:
        return self._forced if self._forced is not None else self.asked and self.offered

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        bearer = request.headers.get("Authorization", "")
        if self.bound and bearer.startswith("Bearer "):
            # The SDK's retry of the request that was challenged, with the token it holds: present it
            # as what it is, a DPoP-bound token.
            return await self._send_with_proof(request, access_token=bearer.removeprefix("Bearer "))
        if not (self.active and _is_token_request(request, body)):
            response = await self._inner.handle_async_request(request)
            self.asked = self.asked or challenges_with_dpop(response)
            if self._forced is None and request.method == "GET" and "/.well-known/" in request.url.path:
                content = await response.aread()
                metadata = _metadata(request, response, content)
                algorithms = metadata.get("dpop_signing_alg_values_supported")
                self.offered = self.offered or (isinstance(algorithms, list) and ALGORITHM in algorithms)
                self.asked = self.asked or metadata.get("dpop_bound_access_tokens_required") is True
                return _rebuilt(request, response, content)
            return response
        response = await self._send_with_proof(request)
        content = await response.aread()
        return _rebuilt(request, response, self._as_bearer(response, content))

    async def _send_with_proof(self, request: httpx2.Request, access_token: str | None = None) -> httpx2.Response:
        """Send with a fresh proof; once more with the nonce a ``use_dpop_nonce`` answer asks for."""
        if access_token is not None:
            request.headers["Authorization"] = f"DPoP {access_token}"
        request.headers["DPoP"] = self.key.proof(request.method, request.url, access_token=access_token)
        response = await self._inner.handle_async_request(request)
        content = await response.aread()
        nonce = asks_for_nonce(response, content)
        if nonce is None:
            if response.headers.get(NONCE_HEADER):
                self.key.remember_nonce(request.url, response.headers[NONCE_HEADER])
            return _rebuilt(request, response, content)
        self.key.remember_nonce(request.url, nonce)
        request.headers["DPoP"] = self.key.proof(request.method, request.url, access_token=access_token)
        return await self._inner.handle_async_request(request)

    def _as_bearer(self, response: httpx2.Response, content: bytes) -> bytes:
        if response.status_code != 200:
            return content
        try:
            answer = json.loads(content)
        except ValueError:
            return content
        if not isinstance(answer, dict) or str(answer.get("token_type", "")).lower() != "dpop":
            return content
        self.bound = True
        return json.dumps({**answer, "token_type": "Bearer"}).encode()

    async def aclose(self) -> None:
        await self._inner.aclose()


def _rebuilt(request: httpx2.Request, response: httpx2.Response, content: bytes) -> httpx2.Response:
    """``response`` with ``content`` as its (already read, decoded) body."""
    dropped = ("content-length", "content-encoding", "transfer-encoding")
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    return httpx2.Response(
        response.status_code, headers=headers, content=content, request=request, extensions=response.extensions
    )
