"""Who is signed in to the console: server-side sessions behind an HttpOnly, SameSite=Strict cookie.

A person signs in with a gateway token (``mcpmux token create NAME --scope ...``): the session
carries the token's name and scopes, and ends when the token is revoked, at sign-out, after
:data:`IDLE_TIMEOUT_S` without a request, or :data:`MAX_AGE_S` after sign-in. When no token exists
(a loopback gateway open to local processes) the console still wants a secret: the console key,
random per process and printed once on the server's stderr, signs in with every scope.

Every state change carries the session's CSRF token and an ``Origin`` (or ``Referer``) naming
this very host: a page of another site, even one on another loopback port, never drives it.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from mcpmux.web.security import Gatekeeper
from mcpmux.web.tokens import grants

__all__ = ["COOKIE", "IDLE_TIMEOUT_S", "MAX_AGE_S", "Session", "Sessions", "same_origin"]

COOKIE = "mcpmux_console"
IDLE_TIMEOUT_S = 30 * 60.0
MAX_AGE_S = 12 * 3600.0
SESSION_BYTES = 32
MAX_SESSIONS = 1000
KEY_IDENTITY = "console-key"
ALL_SCOPES = ("read", "execute", "admin")


@dataclass(slots=True)
class Session:
    """One signed-in browser.

    Attributes:
        who: ``token:NAME``, or ``console-key`` for the key.
        token_name: the token's name (checked at each request: a revoked token ends the session).
        scopes: ``read``, ``execute``, ``admin``.
        csrf: the token every form and state-changing request must echo.
    """

    id: str
    who: str
    token_name: str | None
    scopes: tuple[str, ...]
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(SESSION_BYTES))
    created_at: float = field(default_factory=time.monotonic)
    seen_at: float = field(default_factory=time.monotonic)

    def can(self, scope: str) -> bool:
        """Whether this session may ``read``, ``execute`` (call tools) or ``admin`` (change, approve)."""
        return grants(self.scopes, scope)  # nested: admin includes execute includes read

    def csrf_ok(self, given: str | None) -> bool:
        """Whether ``given`` is this session's CSRF token (compared in constant time)."""
        return given is not None and hmac.compare_digest(given.encode(), self.csrf.encode())


class Sessions:
    """The console's sessions, in memory (a restart signs everyone out).

    Args:
        gate: the gateway's rules (which tokens exist, their scopes).
        key: the console key accepted when no token exists (``None``: never).
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, gate: Gatekeeper, key: str | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.gate, self.key, self._clock = gate, key, clock
        self._sessions: dict[str, Session] = {}

    def tokens_in_use(self) -> bool:
        """Whether sign-in wants a token (any exists, or the gateway requires them) rather than the key."""
        return self.gate.tokens_required()

    def sign_in(self, secret: str) -> Session | None:
        """A new session for a valid token (or the console key while no token exists), else ``None``."""
        secret = secret.strip()
        if not secret:
            return None
        info = self.gate.identify(secret)
        if info is not None and info.toolsets:
            # The console shows and calls everything the host serves: a token bound to toolsets sees
            # only those, at /mcp/NAME (mcpmux token create --toolset), never here.
            return None
        if info is not None:
            return self._new(f"token:{info.name}", info.name, tuple(info.api_scopes))
        if (
            self.key is not None
            and not self.tokens_in_use()
            and hmac.compare_digest(secret.encode(), self.key.encode())
        ):
            return self._new(KEY_IDENTITY, None, ALL_SCOPES)
        return None

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id; expired, revoked or unknown: ``None`` (and forgotten)."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock()
        if now - session.seen_at > IDLE_TIMEOUT_S or now - session.created_at > MAX_AGE_S or not self._valid(session):
            del self._sessions[session_id]
            return None
        session.seen_at = now
        return session

    def sign_out(self, session_id: str) -> None:
        """End a session."""
        self._sessions.pop(session_id, None)

    def _valid(self, session: Session) -> bool:
        tokens = self.gate.security.tokens
        if session.token_name is None:
            return not self.tokens_in_use()  # the key stops working once a token exists
        return tokens is not None and tokens.named(session.token_name) is not None

    def _new(self, who: str, token_name: str | None, scopes: tuple[str, ...]) -> Session:
        if len(self._sessions) >= MAX_SESSIONS:
            oldest = min(self._sessions.values(), key=lambda s: s.seen_at)
            del self._sessions[oldest.id]
        session = Session(secrets.token_urlsafe(SESSION_BYTES), who, token_name, scopes)
        session.created_at = session.seen_at = self._clock()
        self._sessions[session.id] = session
        return session


def same_origin(host: str, scheme: str, origin: str | None, referer: str | None) -> bool:
    """Whether a state-changing request comes from a page of this very host (``Origin``, else ``Referer``).

    Neither header present is refused: browsers send ``Origin`` on every POST, and non-browser
    clients have the REST API.
    """
    if origin is not None and origin != "null":
        return origin.lower() == f"{scheme}://{host}".lower()
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}".lower() == f"{scheme}://{host}".lower()
    return False
