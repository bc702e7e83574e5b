"""The console's ASGI app at ``/ui``: its routes, static assets and event stream over one context.

Every page and action needs a session (:mod:`mcpmux.console.sessions`); a GET without one goes to
the sign-in page, anything else gets 401. Every POST must come from this host's own pages
(``Origin``/``Referer``) and carry the session's CSRF token; ``read`` sessions only look, ``execute``
may try tools, ``admin`` may restart, refresh, approve and sync sources. Responses carry a strict
Content-Security-Policy (scripts and styles only from ``/ui/static``, nothing inline), no framing,
no caching. Templates autoescape everything: a tool's description or result is text, never markup.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from mcpmux.console import live, pages
from mcpmux.console.context import PREFIX, ConsoleContext, SecurityHeaders, templates
from mcpmux.console.sessions import Sessions
from mcpmux.policy import Guard
from mcpmux.policy.pending import PendingApprovals
from mcpmux.web.security import Gatekeeper, HttpSecurity

__all__ = ["PREFIX", "build_console"]


def build_console(
    guard: Guard | Callable[[], Guard],
    security: HttpSecurity,
    *,
    pending: PendingApprovals | None = None,
    key: str | None = None,
    sources: Callable[[], Any] | None = None,
    replica: Callable[[], Mapping[str, Any] | None] | None = None,
) -> ASGIApp:
    """The console at ``/ui`` over ``guard`` (the paths keep their ``/ui`` prefix).

    Args:
        guard: the host, or what returns the current guard (the console calls as face ``console``; calls that
            need approval wait in ``pending``).
        security: the gateway's HTTP rules (its tokens sign people in).
        pending: where calls wait for a person (``None``: no held approvals here).
        key: the console key that signs in while no token exists (``None``: sign-in needs a token).
        sources: returns the REST API's runtime, for the sources page (``None``: not shown).
        replica: returns this gateway's replica and its peers (``None``: not a replica), shown in the header.
    """
    ctx = ConsoleContext(
        (lambda: guard) if isinstance(guard, Guard) else guard, pending, Sessions(Gatekeeper(security), key),
        templates(), sources or (lambda: None), replica or (lambda: None),
    )  # fmt: skip

    def bound(
        handler: Callable[[ConsoleContext, Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await handler(ctx, request)

        return endpoint

    routes: list[BaseRoute] = [
        Mount(f"{PREFIX}/static", app=StaticFiles(directory=str(files("mcpmux.console") / "static"))),
        Route(f"{PREFIX}/events", live.EventStream(ctx)),
        *(Route(f"{PREFIX}{path}", bound(handler), methods=methods) for path, handler, methods in pages.ROUTES),
    ]
    return SecurityHeaders(Starlette(routes=routes))
