"""The gateway as an OAuth 2.1 resource server: access tokens of an external authorization server.

``mcpmux serve --http`` keeps its own static tokens (:mod:`mcpmux.gateway.tokens`) and can accept,
beside them, JWT access tokens issued by an external authorization server: signature checked against
the issuer's JWKS, ``iss`` equal to the issuer, ``aud`` containing the gateway's resource URL, expiry
and not-before with a small leeway. It publishes its protected resource metadata (RFC 9728) so that
MCP clients discover where to log in, and maps claims to the caller identity of policy and audit:
``sub`` names the caller (``oauth:<sub>``), the ``scope`` (or ``scp``) claim gives the scopes:
``mcpmux:approve`` among them lets the caller approve, and ``mcpmux:read``, ``mcpmux:execute`` and
``mcpmux:admin`` are its scopes on the REST API (a token with none of them may not use ``/api``).

Keys are fetched when the gateway starts (:meth:`ExternalTokens.load`) and again, at most once a
minute, when a token names an unknown key (rotation, :meth:`ExternalTokens.refresh_for`); verifying
a token with known keys never waits on the network.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import jwt

from mcpmux.gateway.tokens import API_SCOPES, APPROVE_SCOPE, TokenInfo

__all__ = ["API_SCOPE_PREFIX", "PRM_PATH", "ExternalTokens", "OAuthResourceSettings"]

API_SCOPE_PREFIX = "mcpmux:"
"""An access token's REST API scopes are its ``mcpmux:read``, ``mcpmux:execute`` and ``mcpmux:admin``."""

logger = logging.getLogger(__name__)

PRM_PATH = "/.well-known/oauth-protected-resource"
LEEWAY_S = 30
KEY_REFRESH_INTERVAL_S = 60.0
FETCH_TIMEOUT_S = 10.0
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True)
class OAuthResourceSettings:
    """Which external tokens the gateway accepts.

    Attributes:
        issuer: the authorization server's issuer identifier (exact string).
        resource: the gateway's resource URL (``https://host/mcp``): the audience tokens must name.
        jwks_uri: where the issuer's keys are; discovered from its metadata when ``None``.
        scopes: the scopes advertised in the protected resource metadata.
    """

    issuer: str
    resource: str
    jwks_uri: str | None = None
    scopes: tuple[str, ...] = ()


@dataclass
class ExternalTokens:
    """Verifies external access tokens (JWT) and says who their caller is."""

    settings: OAuthResourceSettings
    _keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    _fetched_at: float = 0.0
    _jwks_uri: str | None = None

    async def load(self) -> None:
        """Fetch the issuer's keys (discovering ``jwks_uri`` from its metadata when not configured).

        Raises:
            httpx2.HTTPError, ValueError: the metadata or the key set could not be fetched or read.
        """
        async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
            uri = self._jwks_uri or self.settings.jwks_uri or await self._discover(http)
            self._jwks_uri = uri
            response = await http.get(uri)
            response.raise_for_status()
            keys = jwt.PyJWKSet.from_dict(response.json())
        self._keys = {str(key.key_id): key for key in keys.keys if key.key_id}
        self._fetched_at = time.monotonic()

    async def _discover(self, http: httpx2.AsyncClient) -> str:
        base = self.settings.issuer.rstrip("/")
        for suffix in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            response = await http.get(base + suffix)
            if response.status_code == 200:
                metadata = response.json()
                if metadata.get("issuer") != self.settings.issuer:
                    raise ValueError(f"metadata at {base + suffix} names issuer {metadata.get('issuer')!r}")
                return str(metadata["jwks_uri"])
        raise ValueError(f"no authorization server metadata found for {self.settings.issuer}")

    def identify(self, token: str) -> TokenInfo | None:
        """The caller of ``token`` if it is a valid access token for this gateway, else ``None``."""
        claims = self.claims(token)
        if claims is None:
            return None
        scopes = str(claims.get("scope") or " ".join(claims.get("scp") or [])).split()
        return TokenInfo(
            name=f"oauth:{claims['sub']}",
            created_at=float(claims.get("iat", 0)),
            can_approve=APPROVE_SCOPE in scopes,
            api_scopes=tuple(scope for scope in API_SCOPES if f"{API_SCOPE_PREFIX}{scope}" in scopes),
        )

    def claims(self, token: str) -> dict[str, Any] | None:
        """The verified claims of ``token``, or ``None`` (bad signature, issuer, audience, expiry, no ``sub``)."""
        kid = self._key_id(token)
        key = None if kid is None else self._keys.get(kid)
        if key is None:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                audience=self.settings.resource,
                issuer=self.settings.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("gateway: external token refused: %s", type(exc).__name__)
            return None
        return claims

    def _key_id(self, token: str) -> str | None:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            return None
        return None if kid is None else str(kid)

    async def refresh_for(self, token: str) -> None:
        """Fetch the keys again when ``token`` names one not held (rotation), at most once a minute."""
        kid = self._key_id(token) if token else None
        if kid is None or kid in self._keys or time.monotonic() - self._fetched_at < KEY_REFRESH_INTERVAL_S:
            return
        try:
            await self.load()
        except (httpx2.HTTPError, ValueError) as exc:
            self._fetched_at = time.monotonic()
            logger.warning("gateway: the keys of %s could not be fetched again: %s", self.settings.issuer, exc)

    def metadata(self) -> dict[str, object]:
        """The protected resource metadata (RFC 9728) of the gateway."""
        body: dict[str, object] = {
            "resource": self.settings.resource,
            "authorization_servers": [self.settings.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.settings.scopes:
            body["scopes_supported"] = list(self.settings.scopes)
        return body

    def metadata_json(self) -> bytes:
        """:meth:`metadata` as the body of the well-known answer."""
        return json.dumps(self.metadata()).encode()

    def challenge(self, base_url: str) -> str:
        """The ``WWW-Authenticate`` value of a 401 that points clients at the metadata."""
        return f'Bearer realm="mcpmux", resource_metadata="{base_url.rstrip("/")}{PRM_PATH}"'
