"""Token introspection (RFC 7662): the gateway asks the authorization server about opaque tokens.

An authorization server that issues opaque access tokens (no signature to check here) answers, at
its introspection endpoint, whether a token is active and what it carries. The gateway calls it
with its own client credentials (HTTP Basic, ``client_secret_basic``) and accepts the token only if
the answer says ``active``, names this gateway in ``aud``, the configured issuer in ``iss`` (when
given), is not expired, and is not a refresh token.

Answers are cached by the token's SHA-256 (never the token itself) for a short time
(:attr:`IntrospectionSettings.ttl_s`, never past the token's ``exp``): a revoked token is refused
at the latest one TTL after its revocation. Concurrent requests with one uncached token share one
introspection call. When the endpoint cannot be reached or answers with an error, the token is
refused (fail closed) and :meth:`Introspector.unavailable` says so, so the gateway answers 503
rather than 401: the client should retry, not log in again.

The endpoint is configured (``--oauth-introspection URL``) or read from the issuer's metadata
(``introspection_endpoint``). It must be https (http only on loopback) and may not resolve to a
private, loopback or link-local address other than the issuer's own host (SSRF), unless allowed
(``--oauth-allow-private``); redirects are never followed. Tokens never reach a log line: a log
names a token by the first 12 hex digits of its hash at most.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

from mcpmux.auth.netguard import UrlPolicy
from mcpmux.errors import OAuthError

__all__ = ["IntrospectionSettings", "Introspector", "token_digest"]

logger = logging.getLogger(__name__)

DEFAULT_TTL_S = 30.0
TIMEOUT_S = 5.0
UNAVAILABLE_FOR_S = 2.0
"""After a failed introspection, how long the token is refused as 'unavailable' before trying again."""
MAX_ENTRIES = 10_000
LEEWAY_S = 30
GATEWAY = "gateway"


def token_digest(token: str) -> str:
    """The SHA-256 of ``token`` (hex): the cache key, and (its first 12 digits) a token's name in logs."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class IntrospectionSettings:
    """How the gateway introspects tokens.

    Attributes:
        client_id: the gateway's client at the authorization server (allowed to introspect).
        client_secret: its secret (sent with HTTP Basic; never logged).
        endpoint: the introspection endpoint; read from the issuer's metadata when ``None``.
        ttl_s: how long an answer is trusted (bounded by the token's ``exp``).
        allow_private: allow an endpoint on a private address other than the issuer's host.
    """

    client_id: str
    client_secret: str = field(repr=False)
    endpoint: str | None = None
    ttl_s: float = DEFAULT_TTL_S
    allow_private: bool = False


@dataclass
class _Entry:
    claims: dict[str, Any] | None
    expires: float


@dataclass
class Introspector:
    """Introspects tokens for one issuer and resource, with a short cache.

    Use :meth:`start` once, :meth:`introspect` (async, may call the network) before
    :meth:`claims` (sync, reads the cache only).
    """

    settings: IntrospectionSettings
    issuer: str
    resource: str
    _endpoint: str | None = None
    _cache: dict[str, _Entry] = field(default_factory=dict)
    _failed: dict[str, float] = field(default_factory=dict)
    _pending: dict[str, anyio.Event] = field(default_factory=dict)
    calls: int = 0
    """How many introspection requests were sent (for tests and metrics)."""

    @property
    def endpoint(self) -> str | None:
        """The endpoint in use (after :meth:`start`)."""
        return self._endpoint

    def _policy(self) -> UrlPolicy:
        return UrlPolicy(GATEWAY, httpx2.URL(self.issuer).host, self.settings.allow_private)

    async def start(self, metadata: Mapping[str, Any] | None = None) -> None:
        """Settle the endpoint (configured, else ``introspection_endpoint`` of ``metadata``) and check it.

        Raises:
            OAuthError: no endpoint is known, or it breaks the URL rules (scheme, SSRF).
        """
        endpoint = self.settings.endpoint or (metadata or {}).get("introspection_endpoint")
        if not isinstance(endpoint, str) or not endpoint:
            raise OAuthError(
                GATEWAY, self.issuer, "the authorization server's metadata names no introspection_endpoint",
                hint="give it with --oauth-introspection URL",
            )  # fmt: skip
        await self._policy().check(httpx2.URL(endpoint))
        self._endpoint = endpoint

    def claims(self, token: str) -> dict[str, Any] | None:
        """The claims of ``token`` if a fresh answer says it is valid for this gateway, else ``None``."""
        entry = self._cache.get(token_digest(token))
        if entry is None or entry.expires <= time.monotonic():
            return None
        return entry.claims

    def unavailable(self, token: str) -> bool:
        """Whether ``token`` could not be checked just now (the endpoint failed): refused, but not invalid."""
        until = self._failed.get(token_digest(token))
        return until is not None and until > time.monotonic()

    async def introspect(self, token: str) -> None:
        """Ask about ``token`` unless a fresh answer (or a recent failure) is cached."""
        key = token_digest(token)
        now = time.monotonic()
        entry = self._cache.get(key)
        if (entry is not None and entry.expires > now) or self._failed.get(key, 0.0) > now:
            return
        pending = self._pending.get(key)
        if pending is not None:
            with anyio.move_on_after(TIMEOUT_S * 3):  # then judged as unknown: refused
                await pending.wait()
            return
        self._pending[key] = event = anyio.Event()
        try:
            await self._ask(key, token)
        finally:
            del self._pending[key]
            event.set()

    async def _ask(self, key: str, token: str) -> None:
        endpoint = self._endpoint
        assert endpoint is not None, "Introspector.start() was not called"
        self.calls += 1
        auth = httpx2.BasicAuth(self.settings.client_id, self.settings.client_secret)
        try:
            async with httpx2.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http:
                response = await http.post(
                    endpoint, data={"token": token, "token_type_hint": "access_token"}, auth=auth,
                    headers={"Accept": "application/json"},
                )  # fmt: skip
            if response.status_code != 200:
                raise ValueError(f"it answered HTTP {response.status_code}")
            answer = response.json()
            if not isinstance(answer, dict):
                raise ValueError("its answer is not a JSON object")
        except (httpx2.HTTPError, ValueError) as exc:
            self._failed[key] = time.monotonic() + UNAVAILABLE_FOR_S
            logger.warning("gateway: token introspection at %s failed (token %s): %s", endpoint, key[:12], exc)
            return
        self._failed.pop(key, None)
        self._remember(key, self._judge(answer, key))

    def _judge(self, answer: dict[str, Any], key: str) -> dict[str, Any] | None:
        """The answer's claims if they make a valid access token for this gateway, else ``None``."""
        problem = _problem(answer, self.issuer, self.resource)
        if problem is not None:
            logger.info("gateway: introspected token %s refused: %s", key[:12], problem)
            return None
        return answer

    def _remember(self, key: str, claims: dict[str, Any] | None) -> None:
        now = time.monotonic()
        expires = now + self.settings.ttl_s
        if claims is not None and isinstance(claims.get("exp"), int | float):
            expires = min(expires, now + float(claims["exp"]) - time.time())
        if len(self._cache) >= MAX_ENTRIES:
            self._cache = {k: e for k, e in self._cache.items() if e.expires > now}
            while len(self._cache) >= MAX_ENTRIES:
                self._cache.pop(next(iter(self._cache)))
        self._cache[key] = _Entry(claims, expires)


def _problem(answer: Mapping[str, Any], issuer: str, resource: str) -> str | None:
    """Why an introspection answer does not make a valid access token for ``resource`` (``None``: it does)."""
    if answer.get("active") is not True:
        return "not active"
    now = time.time()
    exp, nbf = answer.get("exp"), answer.get("nbf")
    if isinstance(exp, int | float) and exp + LEEWAY_S < now:
        return "expired"
    if isinstance(nbf, int | float) and nbf - LEEWAY_S > now:
        return "not valid yet"
    if "iss" in answer and answer["iss"] != issuer:
        return f"issued by {answer['iss']!r}, not {issuer!r}"
    audience = answer.get("aud")
    audiences = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else []
    if resource not in audiences:
        return f"its audience {audiences!r} does not name {resource!r}"
    if str(answer.get("token_type", "")).lower() == "refresh_token":
        return "a refresh token, not an access token"
    if not (answer.get("sub") or answer.get("client_id")):
        return "names neither sub nor client_id"
    return None
