"""Who is calling: the identity the audit log records for a downstream request.

Over HTTP with tokens it is ``token:NAME`` (set by the auth middleware as the request's user);
otherwise the ``clientInfo`` the client gave (``name/version``), or ``None``.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from starlette.authentication import BaseUser
from starlette.requests import Request

__all__ = ["caller_of"]


def caller_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The identity of the client behind ``ctx``."""
    request = ctx.request
    if isinstance(request, Request) and "user" in request.scope:
        user = request.scope["user"]
        if isinstance(user, BaseUser) and user.is_authenticated:
            return f"token:{user.display_name}"
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return f"{info.name}/{info.version}" if info.version else info.name
