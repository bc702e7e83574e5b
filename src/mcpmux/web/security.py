"""Security of the gateway's network faces: Host and Origin, bearer tokens, body size and body deadline.

One ASGI middleware in front of everything (``/mcp``, ``/sse``, ``/healthz``, ``/metrics``), so a
refused request never reaches the SDK and never creates a session:

- ``Host`` not in the allowed list: 421 (DNS rebinding); ``Origin`` present and not allowed: 403
  (both compared exactly, see :mod:`mcpmux.web.origins`);
- tokens required and ``Authorization: Bearer`` missing or unknown: 401; ``/healthz`` answers
  such a request with ``ok`` only. The header is then removed from the request, so nothing
  downstream of here can forward it;
- a token bound to toolsets (``mcpmux token create --toolset NAME``) anywhere but ``/mcp/NAME``,
  ``/sse/NAME`` (and its messages) of one of them, or a public path: 403 naming its paths;
- a body above the cap, declared or chunked: 413; a body not fully received in time: 408.

A refusal under one of :attr:`HttpSecurity.problem_paths` (the REST API's ``/api``) is an RFC 9457
problem document (``application/problem+json``, ``type`` ``about:blank``), the one error shape of
that API; elsewhere it is the plain text MCP clients have always seen.

Tokens are required when the rules say so (``--auth``, a bind off loopback) or as soon as any
token exists, checked at each request: a token created or revoked while the gateway runs counts
at once. The WebSocket face applies the same rules to its handshake (:meth:`Gatekeeper.admit`).
The header deadline (a client trickling its request line and headers) is enforced one level
lower, in :mod:`mcpmux.web.slowloris`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpmux.web.oauth_resource import PRM_PATH, ExternalTokenInfo, ExternalTokens
from mcpmux.web.origins import AddressRules
from mcpmux.web.tokens import TokenInfo, TokenStore

__all__ = [
    "ANONYMOUS",
    "CALLER",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "LOOPBACK_HOSTS",
    "PROBLEM_MEDIA",
    "SUBPROTOCOL_TOKEN_PREFIX",
    "Admitted",
    "Gatekeeper",
    "HttpSecurity",
    "Refusal",
    "SecurityMiddleware",
    "is_loopback",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PUBLIC_PATHS = frozenset({"/healthz"})
PROBLEM_MEDIA = "application/problem+json"
# Browsers cannot set headers on a WebSocket handshake; they can offer subprotocols. The server
# selects ``mcp``, so the token is never echoed back.
SUBPROTOCOL_TOKEN_PREFIX = "mcpmux.bearer."
# Set in the ASGI scope of a public path's request when tokens are required and none was given.
ANONYMOUS = "mcpmux.anonymous"
CALLER = "mcpmux.caller"
"""The ASGI scope key under which an admitted request's :class:`~mcpmux.web.tokens.TokenInfo` is kept."""
CREDENTIAL = "mcpmux.credential"
"""The ASGI scope key of the admitted request's ``Authorization`` value, which is taken out of its
headers: only a replica forwarding the request to the replica that owns it sends it on."""
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="mcpmux"'}
UNAVAILABLE = "The authorization server could not be reached to check the token: retry later"
_LOWERED = (b"host", b"origin")


def _with_and_without_port(names: Sequence[str]) -> list[str]:
    return [form for name in names for form in (name, f"{name}:*")]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the gateway on this machine."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """What the middleware (and the WebSocket handshake) enforces.

    Attributes:
        allowed_hosts: ``Host`` values accepted (``host``, ``host:port``, ``host:*`` for any port).
        allowed_origins: ``Origin`` values accepted (``scheme://host[:port|:*]``); requests
            without ``Origin`` (non-browser clients) pass.
        tokens: the token store; tokens are required once it holds any, or always with
            ``require_token``. ``None``: no tokens at all.
        external: access tokens of an external authorization server accepted beside the store's
            (:mod:`mcpmux.web.oauth_resource`); with it tokens are always required.
        require_token: require a token even while the store is empty (``--auth``, off loopback).
        max_body_bytes: the largest request body.
        body_timeout_s: how long a client may take to send its body.
        problem_paths: path prefixes whose refusals are problem documents (JSON) instead of text.
    """

    allowed_hosts: Sequence[str] = field(default_factory=lambda: _with_and_without_port(LOOPBACK_NAMES))
    allowed_origins: Sequence[str] = field(
        default_factory=lambda: _with_and_without_port([f"http://{name}" for name in LOOPBACK_NAMES])
    )
    tokens: TokenStore | None = None
    external: ExternalTokens | None = None
    require_token: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S
    problem_paths: Sequence[str] = ("/api",)
    own_auth_prefixes: Sequence[str] = ()
    """Path prefixes whose app checks its own credentials (the console's session cookie at ``/ui``):
    no bearer token is asked for there; Host, Origin and the body rules still apply."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request or handshake is refused: an HTTP status and a one-line reason."""

    status: int
    reason: str


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request let in; ``token_name`` is ``None`` when no token was required or given."""

    token_name: str | None = None
    token: str | None = None
    scopes: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()
    """The toolsets the token is bound to (empty: not bound)."""
    groups: tuple[str, ...] = ()
    """The groups an external access token's claims name (policy rules match ``group:NAME``)."""
    api_scopes: tuple[str, ...] | None = None
    """What the token may do (:func:`~mcpmux.web.tokens.grants`); ``None``: no token, or an external
    one that names no ``mcpmux:`` scope (the authorization server's audience alone admits it to MCP)."""


def mcp_scopes(info: TokenInfo) -> tuple[str, ...] | None:
    """The scopes that rule what ``info``'s token may do over MCP (see :attr:`Admitted.api_scopes`)."""
    if isinstance(info, ExternalTokenInfo) and not info.api_scopes:
        return None
    return tuple(info.api_scopes)


class Gatekeeper:
    """The checks of :class:`HttpSecurity`, compiled once, for any face that sees HTTP headers.

    Raises:
        ValueError: an allowed host or origin is malformed.
    """

    def __init__(self, security: HttpSecurity) -> None:
        self.security = security
        self._hosts = AddressRules(security.allowed_hosts, origin=False)
        self._origins = AddressRules(security.allowed_origins, origin=True)

    def check_address(self, host: str, origin: str | None) -> Refusal | None:
        """Refuse a foreign ``Origin`` (403) or ``Host`` (421)."""
        if origin is not None and not self._origins.allows(origin):
            return Refusal(403, "Invalid Origin header")
        if not self._hosts.allows(host):
            return Refusal(421, "Invalid Host header")
        return None

    def tokens_required(self) -> bool:
        """Whether a request must carry a valid token now."""
        tokens = self.security.tokens
        external = self.security.external is not None
        return self.security.require_token or external or (tokens is not None and tokens.any())

    async def refresh(self, token: str) -> None:
        """Before :meth:`identify` on a connection's token: fetch what an external token needs (the
        issuer's rotated keys, an introspection answer; cached). The gateway's own tokens never leave it."""
        external, tokens = self.security.external, self.security.tokens
        if external is not None and not (tokens is not None and token and tokens.check(token)):
            await external.refresh_for(token)

    def identify(self, token: str) -> TokenInfo | None:
        """What ``token`` is (name, scopes) if it is valid now, else ``None``."""
        tokens, external = self.security.tokens, self.security.external
        info = tokens.check(token) if tokens is not None and token else None
        if info is None and external is not None and token:
            info = external.identify(token)
        return info

    def admit(self, headers: Mapping[str, str]) -> Refusal | Admitted:
        """Check a WebSocket handshake (lower-case header names): Origin, Host, then the token.

        The token comes as ``Authorization: Bearer TOKEN`` or, from a browser, as an offered
        subprotocol ``mcpmux.bearer.TOKEN`` beside ``mcp``.
        """
        refusal = self.check_address(headers.get("host", ""), headers.get("origin"))
        if refusal is not None:
            return refusal
        token = self.token_of(headers)
        info = self.identify(token) if token else None
        if info is None:
            if not self.tokens_required():
                return Admitted()
            if self.unavailable(token):
                return Refusal(503, UNAVAILABLE)
            return Refusal(401, "A valid bearer token is required")
        groups = info.groups if isinstance(info, ExternalTokenInfo) else ()
        return Admitted(info.name, token, tuple(info.scopes), info.toolsets, groups, mcp_scopes(info))

    def unavailable(self, token: str) -> bool:
        """Whether ``token`` was refused only because the authorization server could not be asked."""
        external = self.security.external
        return external is not None and external.unavailable(token)

    @staticmethod
    def token_of(headers: Mapping[str, str]) -> str:
        """The bearer token of a WebSocket handshake (lower-case header names), or ``""``."""
        offered = headers.get("sec-websocket-protocol", "")
        return _bearer(headers.get("authorization", "")) or _subprotocol_token(offered)

    def still_valid(self, admitted: Admitted) -> Callable[[], Awaitable[bool]] | None:
        """For a long-lived connection: whether it may go on (its token not revoked or expired
        meanwhile; an external token asked about again when its cached answer runs out, and refused
        while it cannot be: fail closed)."""
        if admitted.token is None:
            return None
        token = admitted.token

        async def valid() -> bool:
            await self.refresh(token)
            return self.identify(token) is not None

        return valid


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _subprotocol_token(value: str) -> str:
    for offered in value.split(","):
        offered = offered.strip()
        if offered.startswith(SUBPROTOCOL_TOKEN_PREFIX):
            return offered.removeprefix(SUBPROTOCOL_TOKEN_PREFIX)
    return ""


class SecurityMiddleware:
    """The checks of :class:`HttpSecurity`, in front of ``app``."""

    def __init__(self, app: ASGIApp, security: HttpSecurity) -> None:
        self.app, self.security = app, security
        self.gate = Gatekeeper(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        external = self.security.external
        if external is not None:
            if scope["path"] == PRM_PATH or scope["path"].startswith(PRM_PATH + "/"):
                await _metadata_response(external)(scope, receive, send)
                return
            await self.gate.refresh(_bearer(headers.get("authorization", "")))
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        credential = headers.get("authorization")
        if credential is not None:
            scope[CREDENTIAL] = credential
        scope["headers"] = _passed_on(scope["headers"])
        body = await self._read_body(headers, receive)
        if isinstance(body, Refusal):
            await self._refused(scope, body)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _refused(self, scope: Scope, refusal: Refusal, headers: Mapping[str, str] | None = None) -> Response:
        """The response for ``refusal``: a problem document under :attr:`HttpSecurity.problem_paths`."""
        path: str = scope["path"]
        if any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in self.security.problem_paths):
            problem = {
                "type": "about:blank",
                "title": HTTPStatus(refusal.status).phrase,
                "status": refusal.status,
                "detail": refusal.reason,
            }
            return JSONResponse(problem, status_code=refusal.status, headers=headers, media_type=PROBLEM_MEDIA)
        return PlainTextResponse(refusal.reason, status_code=refusal.status, headers=headers)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        refusal = self.gate.check_address(headers.get("host", ""), headers.get("origin"))
        if refusal is not None:
            return self._refused(scope, refusal)
        if self.gate.tokens_required() and not self._own_auth(scope["path"]):
            return self._authenticate(scope, headers)
        return None

    def _own_auth(self, path: str) -> bool:
        return any(path == prefix or path.startswith(prefix + "/") for prefix in self.security.own_auth_prefixes)

    def _authenticate(self, scope: Scope, headers: Headers) -> Response | None:
        token = _bearer(headers.get("authorization", ""))
        info = self.gate.identify(token)
        if info is None:
            if scope["path"] in PUBLIC_PATHS:
                scope[ANONYMOUS] = True
                return None
            if self.gate.unavailable(token):  # fail closed, but say it is not the token
                return self._refused(scope, Refusal(503, UNAVAILABLE), {"Retry-After": "2"})
            return self._refused(scope, Refusal(401, "A valid bearer token is required"), self._challenge(headers))
        if info.toolsets and not _toolset_path(scope["path"], info.toolsets):
            paths = ", ".join(f"/mcp/{name}" for name in info.toolsets)
            return self._refused(scope, Refusal(403, f"This token is bound to its toolsets: use {paths}"))
        # The SDK binds each Streamable HTTP session to the client_id of the user that opened it.
        access = AccessToken(token=f"sha256:{info.name}", client_id=info.name, scopes=info.scopes)
        scope["user"] = AuthenticatedUser(access)
        scope[CALLER] = info  # who this is, whichever issued the token (the REST API reads its scopes)
        return None

    def _challenge(self, headers: Headers) -> dict[str, str]:
        external = self.security.external
        if external is None:
            return CHALLENGE
        # The Host was checked against the allowed list above: it names this gateway.
        scheme = "https" if external.settings.resource.startswith("https://") else "http"
        return {"WWW-Authenticate": external.challenge(f"{scheme}://{headers.get('host', '')}")}

    async def _read_body(self, headers: Headers, receive: Receive) -> list[Message] | Refusal:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.security.max_body_bytes:
            return Refusal(413, "Request body too large")
        messages: list[Message] = []
        size = 0
        with anyio.move_on_after(self.security.body_timeout_s) as deadline:
            while True:
                message = await receive()
                messages.append(message)
                if message["type"] != "http.request":
                    return messages
                size += len(message.get("body", b""))
                if size > self.security.max_body_bytes:
                    return Refusal(413, "Request body too large")
                if not message.get("more_body", False):
                    return messages
        assert deadline.cancelled_caught
        return Refusal(408, "Request body not received in time")


def _toolset_path(path: str, toolsets: tuple[str, ...]) -> bool:
    """Whether ``path`` serves one of ``toolsets`` (or is public): compared exactly, never by prefix alone."""
    if path in PUBLIC_PATHS:
        return True
    for name in toolsets:
        if path in (f"/mcp/{name}", f"/mcp/{name}/", f"/sse/{name}") or path.startswith(f"/sse/{name}/messages/"):
            return True
    return False


def _metadata_response(external: ExternalTokens) -> Response:
    return Response(external.metadata_json(), media_type="application/json", headers={"Cache-Control": "max-age=300"})


def _passed_on(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers without ``Authorization``; Host and Origin lower-cased.

    They were accepted case-insensitively; the SDK's own second check is not.
    """
    kept = []
    for name, value in headers:
        lowered = name.lower()
        if lowered in _LOWERED:
            kept.append((name, value.lower()))
        elif lowered != b"authorization":
            kept.append((name, value))
    return kept


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = deque(messages)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
