"""Who is calling: the identity the audit log records, and who may answer approval questions.

With tokens the caller is ``token:NAME``: over HTTP the auth middleware sets the request's user,
(an external OAuth token's caller also carries the groups its claims name: a
:class:`~mcpmux.policy.callers.Caller`, ``token:oauth:SUB (groups: ...)``),
over WebSocket the handshake attaches a :class:`TokenCaller` to every message. Otherwise it is the
``clientInfo`` the client gave (``name/version``), or ``None``. ``clientInfo`` is whatever the client
says, so it names a caller in the audit log but never proves one: only a token, or the stdio
channel (the one local process that started ``mcpmux serve --stdio``), can stand behind an approval
(:func:`approver_of`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from starlette.authentication import BaseUser
from starlette.requests import Request

from mcpmux.config.models import GatewayApprovers
from mcpmux.policy.callers import Caller
from mcpmux.web.oauth_resource import ExternalTokenInfo
from mcpmux.web.security import CALLER, mcp_scopes
from mcpmux.web.tokens import APPROVE_SCOPE, TokenInfo, grants

__all__ = ["LocalCaller", "TokenCaller", "approver_of", "caller_of", "may_call_tools", "stdio_channel"]

STDIO = "stdio"
_channel: ContextVar[str | None] = ContextVar("mcpmux_gateway_channel", default=None)


@dataclass(frozen=True, slots=True)
class TokenCaller:
    """A connection opened with the token called ``name`` (a stream face's request context)."""

    name: str
    scopes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    """The groups of an external access token (see :class:`~mcpmux.policy.callers.Caller`)."""
    api_scopes: tuple[str, ...] | None = None
    """What the token may do (see :attr:`mcpmux.web.security.Admitted.api_scopes`)."""


@dataclass(frozen=True, slots=True)
class LocalCaller:
    """A process of this user on the daemon's Unix socket (``SO_PEERCRED``: the kernel vouches for the pid)."""

    pid: int


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
    token = _token(ctx)
    if token is not None:
        groups = _groups(ctx)
        return Caller(f"token:{token[0]}", groups) if groups else f"token:{token[0]}"
    params = ctx.session.client_params
    info = None if params is None else params.client_info
    name = None if info is None else f"{info.name}/{info.version}" if info.version else info.name
    if isinstance(ctx.request, LocalCaller):
        return f"{name or 'client'} (pid {ctx.request.pid})"
    return name


def may_call_tools(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client behind ``ctx`` may call tools: a token needs the ``execute`` scope
    (:func:`~mcpmux.web.tokens.grants`); a request with no token is the local user's."""
    request = ctx.request
    scopes: tuple[str, ...] | None = None
    if isinstance(request, TokenCaller):
        scopes = request.api_scopes
    elif isinstance(request, Request) and isinstance(info := request.scope.get(CALLER), TokenInfo):
        scopes = mcp_scopes(info)
    return scopes is None or grants(scopes, "execute")


def approver_of(ctx: ServerRequestContext[Any, Any], allowed: GatewayApprovers) -> str | None:
    """The identity under which the client behind ``ctx`` may answer approvals, or ``None`` if it may not.

    A token made with ``--can-approve`` answers as ``token:NAME``; the stdio client as
    ``stdio:<clientInfo>``. Each identity's "always" answers bind only itself.
    """
    token = _token(ctx)
    if token is not None:
        name, scopes = token
        return f"token:{name}" if allowed.tokens and APPROVE_SCOPE in scopes else None
    if isinstance(ctx.request, LocalCaller):
        return f"local:{caller_of(ctx)}" if allowed.stdio else None
    if _channel.get() == STDIO and allowed.stdio and not isinstance(ctx.request, Request | TokenCaller):
        return f"{STDIO}:{caller_of(ctx) or 'client'}"
    return None


def _token(ctx: ServerRequestContext[Any, Any]) -> tuple[str, tuple[str, ...]] | None:
    """The name and scopes of the token behind ``ctx`` (HTTP user or WebSocket handshake), if any."""
    request = ctx.request
    if isinstance(request, TokenCaller):
        return request.name, request.scopes
    if isinstance(request, Request) and "user" in request.scope:
        user = request.scope["user"]
        if isinstance(user, BaseUser) and user.is_authenticated:
            scopes = tuple(user.scopes) if isinstance(user, AuthenticatedUser) else ()
            return user.display_name, scopes
    return None


def _groups(ctx: ServerRequestContext[Any, Any]) -> tuple[str, ...]:
    """The groups of the external access token behind ``ctx`` (verified by the auth middleware)."""
    request = ctx.request
    if isinstance(request, TokenCaller):
        return request.groups
    info = request.scope.get(CALLER) if isinstance(request, Request) else None
    return info.groups if isinstance(info, ExternalTokenInfo) else ()
