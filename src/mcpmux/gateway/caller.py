"""Who is calling: the identity the audit log records, and who may answer approval questions.

Over HTTP with tokens the caller is ``token:NAME`` (set by the auth middleware as the request's
user); otherwise the ``clientInfo`` the client gave (``name/version``), or ``None``. ``clientInfo``
is whatever the client says, so it names a caller in the audit log but never proves one: only a
token, or the stdio channel (the one local process that started ``mcpmux serve --stdio``), can
stand behind an approval (:func:`approver_of`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from starlette.authentication import BaseUser
from starlette.requests import Request

from mcpmux.config.models import GatewayApprovers
from mcpmux.gateway.tokens import APPROVE_SCOPE

__all__ = ["approver_of", "caller_of", "stdio_channel"]

STDIO = "stdio"
_channel: ContextVar[str | None] = ContextVar("mcpmux_gateway_channel", default=None)


@contextmanager
def stdio_channel() -> Iterator[None]:
    """Mark the requests served inside the block as coming from the local stdio client."""
    token = _channel.set(STDIO)
    try:
        yield
    finally:
        _channel.reset(token)


def caller_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The identity of the client behind ``ctx``."""
    user = _user(ctx)
    if user is not None:
        return f"token:{user.display_name}"
    params = ctx.session.client_params
    if params is None:
        return None
    info = params.client_info
    return f"{info.name}/{info.version}" if info.version else info.name


def approver_of(ctx: ServerRequestContext[Any, Any], allowed: GatewayApprovers) -> str | None:
    """The identity under which the client behind ``ctx`` may answer approvals, or ``None`` if it may not.

    A token made with ``--can-approve`` answers as ``token:NAME``; the stdio client as
    ``stdio:<clientInfo>``. Each identity's "always" answers bind only itself.
    """
    user = _user(ctx)
    if user is not None:
        can = allowed.tokens and isinstance(user, AuthenticatedUser) and APPROVE_SCOPE in user.scopes
        return f"token:{user.display_name}" if can else None
    if _channel.get() == STDIO and allowed.stdio and not isinstance(ctx.request, Request):
        return f"{STDIO}:{caller_of(ctx) or 'client'}"
    return None


def _user(ctx: ServerRequestContext[Any, Any]) -> BaseUser | None:
    request = ctx.request
    if isinstance(request, Request) and "user" in request.scope:
        user = request.scope["user"]
        if isinstance(user, BaseUser) and user.is_authenticated:
            return user
    return None
