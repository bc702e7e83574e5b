"""Route what a server sends unasked to the user's callbacks: its requests and its notifications.

The SDK's ``ClientSession`` takes context-first callbacks and one ``message_handler``; this module
adapts a :class:`ClientCallbacks` to those shapes for one server. A callback that raises becomes an
``INTERNAL_ERROR`` answer to the server (and an error log here), never a crashed session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import mcp_types as types
from mcp.client.session import (
    ClientRequestContext,
    ElicitationFnT,
    IncomingMessage,
    ListRootsFnT,
    MessageHandlerFnT,
    SamplingFnT,
)

from mcpmux.types.callbacks import (
    ClientCallbacks,
    ElicitationCallback,
    ListKind,
    RootsCallback,
    SamplingCallback,
)

__all__ = ["SessionHooks", "build_hooks", "server_logger"]

logger = logging.getLogger(__name__)

# RFC 5424 severities (MCP logging levels) onto Python's.
_LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_LIST_CHANGED: dict[type[types.ServerNotification], ListKind] = {
    types.ToolListChangedNotification: "tools",
    types.ResourceListChangedNotification: "resources",
    types.PromptListChangedNotification: "prompts",
}

_R = TypeVar("_R")


def server_logger(server: str) -> logging.Logger:
    """The logger a server's own log messages go to."""
    return logging.getLogger(f"mcpmux.server.{server}")


@dataclass(frozen=True, slots=True)
class SessionHooks:
    """The SDK-shaped callbacks for one server; ``None`` keeps a capability unadvertised."""

    sampling: SamplingFnT | None
    elicitation: ElicitationFnT | None
    roots: ListRootsFnT | None
    message_handler: MessageHandlerFnT


async def _answer(server: str, what: str, call: Callable[[], Awaitable[_R]]) -> _R | types.ErrorData:
    try:
        return await call()
    except Exception as exc:
        logger.exception("the %s callback for server %r raised", what, server)
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"client {what} callback failed: {exc}")


def build_hooks(server: str, callbacks: ClientCallbacks) -> SessionHooks:
    """Adapt ``callbacks`` to the SDK session's callback shapes for ``server``."""
    return SessionHooks(
        sampling=None if callbacks.sampling is None else _sampling(server, callbacks.sampling),
        elicitation=None if callbacks.elicitation is None else _elicitation(server, callbacks.elicitation),
        roots=None if callbacks.roots is None else _roots(server, callbacks.roots),
        message_handler=_notification_router(server, callbacks),
    )


def _sampling(server: str, callback: SamplingCallback) -> SamplingFnT:
    async def answer(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        return await _answer(server, "sampling", lambda: callback(server, params))

    return answer


def _elicitation(server: str, callback: ElicitationCallback) -> ElicitationFnT:
    async def answer(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await _answer(server, "elicitation", lambda: callback(server, params))

    return answer


def _roots(server: str, callback: RootsCallback) -> ListRootsFnT:
    async def answer(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        return await _answer(server, "roots", lambda: callback(server))

    return answer


def _notification_router(server: str, callbacks: ClientCallbacks) -> MessageHandlerFnT:
    # The server's logger is got per log message, not here: most servers never send one, and
    # making a logger per server is measurable when 50 start at once.
    async def route(message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            # Transport faults are consumed by the connection's own stream hook; this is a fallback.
            logger.warning("server %r: transport reported %r", server, message)
            return
        if isinstance(message, types.LoggingMessageNotification):
            params = message.params
            server_logger(server).log(
                _LOG_LEVELS.get(params.level, logging.INFO), "%s", params.data, extra={"mcp_logger": params.logger}
            )
            if callbacks.on_log is not None:
                await callbacks.on_log(server, params)
        elif (kind := _LIST_CHANGED.get(type(message))) is not None:
            if callbacks.on_list_changed is not None:
                await callbacks.on_list_changed(server, kind)
        elif isinstance(message, types.ResourceUpdatedNotification):
            if callbacks.on_resource_updated is not None:
                await callbacks.on_resource_updated(server, message.params.uri)
        elif isinstance(message, types.ProgressNotification) and callbacks.on_progress is not None:
            await callbacks.on_progress(server, message.params)

    return route
