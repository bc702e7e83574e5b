"""What every console page works with: the context, the session check in front of each page, forms, headers.

The rules they enforce are described in :mod:`mcpmux.console.app`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import wraps
from typing import Any
from urllib.parse import parse_qsl

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpmux.console.render import FILTERS
from mcpmux.console.sessions import COOKIE, MAX_AGE_S, Session, Sessions, same_origin
from mcpmux.errors import MCPMuxError
from mcpmux.policy import Guard
from mcpmux.policy.pending import PendingApprovals

__all__ = ["PREFIX", "ConsoleContext", "SecurityHeaders", "form_of", "page", "set_session_cookie", "templates"]

logger = logging.getLogger(__name__)

PREFIX = "/ui"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
MAX_FORM_FIELDS = 500

Handler = Callable[["ConsoleContext", Request, Session], Awaitable[Response]]


@dataclass
class ConsoleContext:
    """What the pages work with.

    Attributes:
        guard_of: the host's guard now (the REST API's runtime rebuilds its guard when sources change).
        pending: the calls held for a person, or ``None`` when approvals are not held here.
        sessions: who is signed in.
        templates: the Jinja2 environment (autoescaping on).
        sources_of: the REST API's runtime now, for the sources page (``None``: not served).
    """

    guard_of: Callable[[], Guard]
    pending: PendingApprovals | None
    sessions: Sessions
    templates: jinja2.Environment
    sources_of: Callable[[], Any] = lambda: None
    replica_of: Callable[[], Mapping[str, Any] | None] = lambda: None
    """This gateway as a replica (``Cluster.to_json()``: its id and live peers), ``None`` when alone."""
    measured: dict[tuple[str, int | None], tuple[float, dict[str, Any]]] = field(default_factory=dict)
    """Each server's usage and call stats, kept a few seconds (see :mod:`mcpmux.console.pages`)."""

    @property
    def guard(self) -> Guard:
        """The guard as face ``console``: its calls that need approval wait in :attr:`pending`."""
        return self.guard_of().with_face("console", approver=self.pending)

    @property
    def sources(self) -> Any:
        """The REST API's runtime (its source registry), or ``None``."""
        return self.sources_of()

    def render(
        self, request: Request, session: Session | None, name: str, status: int = 200, **values: Any
    ) -> Response:
        """The template ``name`` as an HTML response."""
        page = self.templates.get_template(name)
        held = len(self.pending.held()) if self.pending is not None else 0
        html = page.render(
            request=request, session=session, prefix=PREFIX, held_count=held, replica=self.replica_of(), **values
        )
        return HTMLResponse(html, status_code=status)


def templates() -> jinja2.Environment:
    """The console's templates (packaged with mcpmux), autoescaped."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("mcpmux.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(FILTERS)
    return env


async def form_of(request: Request) -> dict[str, str]:
    """The urlencoded body of ``request`` (the last of repeated fields; capped in count)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    pairs = parse_qsl(body, keep_blank_values=True, max_num_fields=MAX_FORM_FIELDS)
    return dict(pairs)


def page(scope: str = "read") -> Callable[[Handler], Callable[[ConsoleContext, Request], Awaitable[Response]]]:
    """A page or action that needs a session with ``scope``; POSTs also need same-origin and CSRF."""

    def wrap(handler: Handler) -> Callable[[ConsoleContext, Request], Awaitable[Response]]:
        @wraps(handler)
        async def guarded(ctx: ConsoleContext, request: Request) -> Response:
            session = ctx.sessions.get(request.cookies.get(COOKIE))
            if session is None:
                if request.method == "GET":
                    return RedirectResponse(f"{PREFIX}/login", status_code=303)
                return PlainTextResponse("Sign in first: no console session", status_code=401)
            if request.method != "GET":
                refusal = await _state_change_refusal(request, session)
                if refusal is not None:
                    return refusal
            if not session.can(scope):
                have = ", ".join(session.scopes) or "none"
                message = f"This needs a token with the {scope!r} scope; yours has {have}."
                return ctx.render(request, session, "error.html", 403, title="Not allowed", message=message, hint=None)
            try:
                return await handler(ctx, request, session)
            except MCPMuxError as exc:
                return ctx.render(request, session, "error.html", 400, title="That did not work",
                                  message=str(exc), hint=exc.hint)  # fmt: skip

        return guarded

    return wrap


async def _state_change_refusal(request: Request, session: Session) -> Response | None:
    headers = request.headers
    if not same_origin(headers.get("host", ""), request.url.scheme, headers.get("origin"), headers.get("referer")):
        return PlainTextResponse("Cross-origin request refused", status_code=403)
    given = headers.get("x-csrf-token")
    if given is None:
        given = (await form_of(request)).get("csrf")
    if not session.csrf_ok(given):
        return PlainTextResponse("Missing or wrong CSRF token: reload the page and try again", status_code=403)
    return None


def set_session_cookie(response: Response, request: Request, session: Session) -> None:
    """The session cookie: HttpOnly, SameSite=Strict, this console's path only, Secure over HTTPS."""
    response.set_cookie(
        COOKIE, session.id, max_age=int(MAX_AGE_S), path=PREFIX, httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip


class SecurityHeaders:
    """Adds the security headers to every response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)
