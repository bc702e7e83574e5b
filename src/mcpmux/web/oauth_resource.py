"""The gateway as an OAuth 2.1 resource server: access tokens of an external authorization server.

``mcpmux serve --http`` keeps its own static tokens (:mod:`mcpmux.web.tokens`) and can accept,
beside them, JWT access tokens issued by an external authorization server: signature checked against
the issuer's JWKS, ``iss`` equal to the issuer, ``aud`` containing the gateway's resource URL, expiry
and not-before with a small leeway. It publishes its protected resource metadata (RFC 9728) so that
MCP clients discover where to log in, and maps claims to the caller identity of policy and audit:
``sub`` names the caller (``oauth:<sub>``), the ``scope`` (or ``scp``) claim gives the scopes:
``mcpmux:approve`` among them lets the caller approve, and ``mcpmux:read``, ``mcpmux:execute`` and
``mcpmux:admin`` are its scopes on the REST API (a token with none of them may not use ``/api``).
The groups claim (:attr:`OAuthResourceSettings.groups_claim`: ``groups`` by default, any claim name,
a dotted path such as ``realm_access.roles`` for a nested one) gives the caller's groups, which
policy rules can match (``approval_rules: [{tools: ..., callers: [group:NAME], action: ...}]``) and
the audit log records (:class:`~mcpmux.policy.callers.Caller`).

Opaque tokens (not JWTs) are introspected (RFC 7662, :mod:`mcpmux.web.introspection`) when
:attr:`ExternalTokens.introspection` is set; the same claims mapping applies to the answer.

Keys are fetched when the gateway starts (:meth:`ExternalTokens.load`) and again, at most once a
minute, when a token names an unknown key (rotation, :meth:`ExternalTokens.refresh_for`); verifying
a token with known keys never waits on the network.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

import httpx2
import jwt

from mcpmux.web.introspection import Introspector
from mcpmux.web.tokens import API_SCOPES, APPROVE_SCOPE, TOKEN_PREFIX, TokenInfo

__all__ = [
    "API_SCOPE_PREFIX",
    "PRM_PATH",
    "ExternalTokenInfo",
    "ExternalTokens",
    "OAuthResourceSettings",
    "claim_at",
    "claims_problem",
]

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
        groups_claim: the claim that lists the caller's groups (a dotted path for a nested claim,
            ``realm_access.roles``); a string value is split on spaces and commas.
    """

    issuer: str
    resource: str
    jwks_uri: str | None = None
    scopes: tuple[str, ...] = ()
    groups_claim: str = "groups"


@dataclass(frozen=True, slots=True)
class ExternalTokenInfo(TokenInfo):
    """The caller of an external access token: a :class:`TokenInfo` with the groups its claims name."""

    groups: tuple[str, ...] = ()


def claim_at(claims: dict[str, Any], path: str) -> Any:
    """The value at ``path`` in ``claims``: a claim name, or a dotted path into nested objects.

    A claim whose name itself contains dots (``https://example.com/groups``) is found as is first.
    """
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


_TIMES = ("exp", "nbf", "iat")
"""The claims that are NumericDate values (RFC 7519 section 2): a JSON number, never a string or a boolean."""


def claims_problem(claims: dict[str, Any]) -> str | None:
    """What makes verified JWT ``claims`` unacceptable, or ``None``.

    PyJWT converts ``exp``, ``nbf`` and ``iat`` with ``int()``, so ``"exp": "9999999999"`` would pass
    its checks; RFC 7519 makes them numbers. ``sub`` must name someone: the caller of policy and audit.
    The scope claims must have their registered shapes (``scope`` a string, ``scp`` a list of strings).
    """
    for name in _TIMES:
        value = claims.get(name)
        if name in claims and (isinstance(value, bool) or not isinstance(value, int | float) or not isfinite(value)):
            return f"its {name!r} claim is not a number"
    if not _names_someone(claims.get("sub")):
        return "its 'sub' claim is empty or not a string"
    if "scope" in claims and not isinstance(claims["scope"], str):
        return "its 'scope' claim is not a string"
    scp = claims.get("scp")
    if "scp" in claims and not (isinstance(scp, list) and all(isinstance(s, str) for s in scp)):
        return "its 'scp' claim is not a list of strings"
    return None


def _names_someone(subject: object) -> bool:
    """Whether ``subject`` can name a caller: a string with a visible character and no control one."""
    return isinstance(subject, str) and bool(subject.strip()) and subject.isprintable()


def _is_jwt(token: str) -> bool:
    """Whether ``token`` is shaped as a JWT: judged by its signature alone, never introspected."""
    try:
        jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        return False
    return True


def _groups(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[Any] = value.replace(",", " ").split()
    elif isinstance(value, list):
        items = value
    else:
        return ()
    return tuple(sorted({item for item in items if isinstance(item, str) and item}))


@dataclass
class ExternalTokens:
    """Verifies external access tokens (JWT) and says who their caller is."""

    settings: OAuthResourceSettings
    _keys: dict[str, jwt.PyJWK] = field(default_factory=dict)
    _fetched_at: float = 0.0
    _jwks_uri: str | None = None
    introspection: Introspector | None = None
    """Introspects tokens that are not JWTs of the issuer (RFC 7662); ``None``: JWTs only."""
    _metadata: dict[str, Any] | None = None

    async def load(self) -> None:
        """Fetch the issuer's keys (discovering ``jwks_uri`` from its metadata when not configured).

        With :attr:`introspection`, also settle its endpoint; keys that cannot be fetched are then
        only a warning (an authorization server of opaque tokens may publish none).

        Raises:
            httpx2.HTTPError, ValueError: the metadata or the key set could not be fetched or read.
            OAuthError: the introspection endpoint is unknown or breaks the URL rules.
        """
        if self.introspection is None:
            await self._load_keys()
            return
        try:
            await self._load_keys()
        except (httpx2.HTTPError, ValueError, KeyError) as exc:
            logger.warning(
                "gateway: no keys of %s (%s): only introspected tokens are accepted", self.settings.issuer, exc
            )
        if self.introspection.settings.endpoint is None and self._metadata is None:
            async with httpx2.AsyncClient(timeout=FETCH_TIMEOUT_S) as http:
                await self._discover(http)
        await self.introspection.start(self._metadata)

    async def _load_keys(self) -> None:
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
                self._metadata = metadata
                return str(metadata["jwks_uri"])
        raise ValueError(f"no authorization server metadata found for {self.settings.issuer}")

    def identify(self, token: str) -> TokenInfo | None:
        """The caller of ``token`` if it is a valid access token for this gateway, else ``None``.

        A JWT is checked here; any other token by the answer :meth:`refresh_for` cached.
        """
        claims = self.claims(token)
        if claims is None and self.introspection is not None and not _is_jwt(token):
            claims = self.introspection.claims(token)
        if claims is None:
            return None
        scopes = str(claims.get("scope") or " ".join(claims.get("scp") or [])).split()
        subject = claims.get("sub") or claims.get("client_id")
        if not _names_someone(subject):
            logger.info("gateway: external token refused: its subject (sub or client_id) is empty or not a string")
            return None
        return ExternalTokenInfo(
            name=f"oauth:{subject}",
            created_at=float(claims.get("iat", 0)),
            can_approve=APPROVE_SCOPE in scopes,
            api_scopes=tuple(scope for scope in API_SCOPES if f"{API_SCOPE_PREFIX}{scope}" in scopes),
            groups=_groups(claim_at(claims, self.settings.groups_claim)),
        )

    def unavailable(self, token: str) -> bool:
        """Whether ``token`` was refused only because the introspection endpoint failed just now."""
        return self.introspection is not None and bool(token) and self.introspection.unavailable(token)

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
        problem = claims_problem(claims)
        if problem is not None:
            logger.info("gateway: external token refused: %s", problem)
            return None
        return claims

    def _key_id(self, token: str) -> str | None:
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            return None
        return None if kid is None else str(kid)

    async def refresh_for(self, token: str) -> None:
        """Fetch the keys again when ``token`` names one not held (rotation), at most once a minute;
        introspect a token that is not a JWT of a known key (when :attr:`introspection` is set)."""
        if self.introspection is not None and token and not _is_jwt(token):
            if not token.startswith(TOKEN_PREFIX):  # the gateway's own tokens never leave it
                await self.introspection.introspect(token)
            return
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
