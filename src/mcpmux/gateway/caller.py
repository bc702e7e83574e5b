"""Who is calling: the identity the audit log records for a downstream request.

With tokens it is ``token:NAME``: over HTTP the auth middleware sets the request's user, over
WebSocket the handshake attaches a :class:`TokenCaller` to every message. Otherwise the
``clientInfo`` the client gave (``name/version``), or ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from starlette.authentication import BaseUser
from starlette.requests import Request

__all__ = ["TokenCaller", "caller_of"]


@dataclass(frozen=True, slots=True)
class TokenCaller:
    """A connection opened with the token called ``name`` (a stream face's request context)."""

    name: str


def caller_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The identity of the client behind ``ctx``."""
    request = ctx.request
    if isinstance(request, TokenCaller):
        return f"token:{request.name}"
    if isinstance(request, Request) and "user" in request.scope:
        user = request.scope["user"]
        if isinstance(user, BaseUser) and user.is_authenticated:
            return f"token:{user.display_name}"
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return f"{info.name}/{info.version}" if info.version else info.name
