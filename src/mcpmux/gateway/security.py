"""HTTP security of the gateway: Host and Origin, bearer tokens, body size and body deadline.

One ASGI middleware in front of everything (``/mcp``, ``/sse``, ``/healthz``, ``/metrics``), so a
refused request never reaches the SDK and never creates a session:

- ``Host`` not in the allowed list: 421 (DNS rebinding); ``Origin`` present and not allowed: 403;
- tokens required and ``Authorization: Bearer`` missing or unknown: 401 (``/healthz`` excepted);
  the header is then removed from the request, so nothing downstream of here can forward it;
- a body above the cap, declared or chunked: 413; a body not fully received in time: 408.

The header deadline (a client trickling its request line and headers) is enforced one level
lower, in :mod:`mcpmux.gateway.slowloris`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpmux.gateway.tokens import TokenStore

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "LOOPBACK_HOSTS",
    "HttpSecurity",
    "SecurityMiddleware",
    "is_loopback",
]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
DEFAULT_BODY_TIMEOUT_S = 10.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PUBLIC_PATHS = frozenset({"/healthz"})


def _with_and_without_port(names: Sequence[str]) -> list[str]:
    # Listed both ways because the SDK's own check (our second line) matches "name:*" only with a port.
    return [form for name in names for form in (name, f"{name}:*")]


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the gateway on this machine."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass(frozen=True, slots=True)
class HttpSecurity:
    """What the middleware enforces.

    Attributes:
        allowed_hosts: ``Host`` values accepted; ``name:*`` accepts any port.
        allowed_origins: ``Origin`` values accepted (requests without ``Origin`` pass).
        tokens: the token store when tokens are required, else ``None``.
        max_body_bytes: the largest request body.
        body_timeout_s: how long a client may take to send its body.
    """

    allowed_hosts: Sequence[str] = field(default_factory=lambda: _with_and_without_port(LOOPBACK_NAMES))
    allowed_origins: Sequence[str] = field(
        default_factory=lambda: _with_and_without_port([f"http://{name}" for name in LOOPBACK_NAMES])
    )
    tokens: TokenStore | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S


def _matches(value: str, allowed: Sequence[str]) -> bool:
    return any(value == a or (a.endswith(":*") and value.startswith(a[:-1])) for a in allowed)


class SecurityMiddleware:
    """The checks of :class:`HttpSecurity`, in front of ``app``."""

    def __init__(self, app: ASGIApp, security: HttpSecurity) -> None:
        self.app, self.security = app, security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
        body = await self._read_body(headers, receive)
        if isinstance(body, PlainTextResponse):
            await body(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _refusal(self, scope: Scope, headers: Headers) -> PlainTextResponse | None:
        if not _matches(headers.get("host", ""), self.security.allowed_hosts):
            return PlainTextResponse("Invalid Host header", status_code=421)
        origin = headers.get("origin")
        if origin is not None and not _matches(origin, self.security.allowed_origins):
            return PlainTextResponse("Invalid Origin header", status_code=403)
        if self.security.tokens is not None and scope["path"] not in PUBLIC_PATHS:
            return self._authenticate(scope, headers)
        return None

    def _authenticate(self, scope: Scope, headers: Headers) -> PlainTextResponse | None:
        assert self.security.tokens is not None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        info = self.security.tokens.check(token.strip()) if scheme.lower() == "bearer" and token else None
        if info is None:
            challenge = {"WWW-Authenticate": 'Bearer realm="mcpmux"'}
            return PlainTextResponse("A valid bearer token is required", status_code=401, headers=challenge)
        # The SDK binds each Streamable HTTP session to the client_id of the user that opened it.
        access = AccessToken(token=f"sha256:{info.name}", client_id=info.name, scopes=info.scopes)
        scope["user"] = AuthenticatedUser(access)
        return None

    async def _read_body(self, headers: Headers, receive: Receive) -> list[Message] | PlainTextResponse:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.security.max_body_bytes:
            return PlainTextResponse("Request body too large", status_code=413)
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
                    return PlainTextResponse("Request body too large", status_code=413)
                if not message.get("more_body", False):
                    return messages
        assert deadline.cancelled_caught
        return PlainTextResponse("Request body not received in time", status_code=408)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = deque(messages)

    async def replayed() -> Message:
        if pending:
            return pending.popleft()
        return await receive()

    return replayed
