"""The downstream side: every connected client, where upstream notifications fan out to.

Handshake-era (2025-11-25) clients are remembered when they send ``notifications/initialized``
and reached on their connection's standalone channel; a client whose channel fails is forgotten.
Stateless-era (2026-07-28) clients get the same events through ``subscriptions/listen`` streams
fed by a :class:`~mcp.server.subscriptions.InMemorySubscriptionBus`.
"""

from __future__ import annotations

import itertools
import logging
from collections import OrderedDict
from collections.abc import Callable

import anyio
import mcp_types as types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)

from mcpmux.gateway.relay import Relay
from mcpmux.types import ClientCallbacks

__all__ = ["MAX_REMEMBERED_SESSIONS", "NOTIFY_TIMEOUT_S", "Downstream"]

logger = logging.getLogger(__name__)

MAX_REMEMBERED_SESSIONS = 4096
NOTIFY_TIMEOUT_S = 2.0

_LIST_EVENTS: dict[str, tuple[ServerEvent, types.ServerNotification]] = {
    "tools": (ToolsListChanged(), types.ToolListChangedNotification()),
    "prompts": (PromptsListChanged(), types.PromptListChangedNotification()),
    "resources": (ResourcesListChanged(), types.ResourceListChangedNotification()),
}


class Downstream:
    """The connected downstream clients and the subscription bus of the stateless era."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.relay = Relay()
        self._sessions: OrderedDict[int, ServerSession] = OrderedDict()
        self._subscribers: dict[str, set[int]] = {}
        self._listen_keys = itertools.count(1)
        self.downstream_uri: Callable[[str, str], str] = lambda server, uri: uri
        """Maps ``(server, upstream URI)`` to the URI clients know (the gateway sets it)."""
        self.unwatched: Callable[[str, str], None] | None = None
        """Called with ``(server, upstream URI)`` when an update arrives that no client subscribed to."""

    def __len__(self) -> int:
        return len(self._sessions)

    def remember(self, session: ServerSession) -> None:
        """Remember a handshake-era client (called once per connection, on ``initialized``)."""
        self._sessions[_key(session)] = session
        while len(self._sessions) > MAX_REMEMBERED_SESSIONS:
            self._forget(next(iter(self._sessions)))

    def subscribe(self, session: ServerSession, uri: str) -> bool:
        """Note that ``session`` wants updates of ``uri`` (a downstream URI); return whether it is the first."""
        self._sessions.setdefault(_key(session), session)
        return self.watch(_key(session), uri)

    def unsubscribe(self, session: ServerSession, uri: str) -> bool:
        """Drop ``session``'s subscription to ``uri``; return whether nobody is subscribed any more."""
        return self.unwatch(_key(session), uri)

    def watch(self, key: int, uri: str) -> bool:
        """Count ``key`` (a client, or a :meth:`listen_key`) as subscribed to ``uri``; return whether it is first."""
        subscribers = self._subscribers.setdefault(uri, set())
        first = not subscribers
        subscribers.add(key)
        return first

    def unwatch(self, key: int, uri: str) -> bool:
        """Drop ``key``'s subscription to ``uri``; return whether nobody is subscribed any more."""
        subscribers = self._subscribers.get(uri)
        if subscribers is None or key not in subscribers:
            return False
        subscribers.discard(key)
        if subscribers:
            return False
        del self._subscribers[uri]
        return True

    def listen_key(self) -> int:
        """A key for one stateless-era ``subscriptions/listen`` stream (never a client connection's)."""
        return -next(self._listen_keys)

    def subscribed(self, uri: str) -> bool:
        """Whether any remembered client is subscribed to ``uri``."""
        return bool(self._subscribers.get(uri))

    async def list_changed(self, kind: str) -> None:
        """Tell every client that the gateway's list of ``kind`` changed."""
        event, notification = _LIST_EVENTS[kind]
        await self.bus.publish(event)
        await self._broadcast(notification)

    async def resource_updated(self, uri: str) -> None:
        """Tell the clients subscribed to ``uri`` (a downstream URI) that it changed.

        Handshake-era clients subscribed with ``resources/subscribe``; stateless-era listeners get
        it through the bus, which applies their own ``subscriptions/listen`` filters.
        """
        await self.bus.publish(ResourceUpdated(uri=uri))
        params = types.ResourceUpdatedNotificationParams(uri=uri)
        await self._broadcast(types.ResourceUpdatedNotification(params=params), only=self._subscribers.get(uri, set()))

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """Relay an upstream log message, with the server's name as its logger.

        While a downstream call runs on ``server`` the message goes to that call's client only,
        on the call's own stream (the upstream connection is shared, so this is the best
        attribution there is); otherwise every client gets it.
        """
        logger_name = server if params.logger is None else f"{server}.{params.logger}"
        relayed = types.LoggingMessageNotificationParams(level=params.level, data=params.data, logger=logger_name)
        notification = types.LoggingMessageNotification(params=relayed)
        ctx = self.relay.caller_of_call(server)
        if ctx is None:
            await self._broadcast(notification)
            return
        try:
            with anyio.fail_after(NOTIFY_TIMEOUT_S):
                await ctx.session.send_notification(notification, related_request_id=ctx.request_id)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, TimeoutError, OSError) as exc:
            logger.debug("a log message for a call's client was lost: %r", exc)

    async def _broadcast(self, notification: types.ServerNotification, only: set[int] | None = None) -> None:
        for key, session in list(self._sessions.items()):
            if only is not None and key not in only:
                continue
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT_S):
                    await session.send_notification(notification)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, TimeoutError, OSError) as exc:
                logger.debug("forgetting a downstream client: %s failed: %r", notification.method, exc)
                self._forget(key)

    def _forget(self, key: int) -> None:
        # A forgotten client's subscriptions go with it; the upstream ones are dropped when the
        # next update finds nobody subscribed (see client_callbacks).
        self._sessions.pop(key, None)
        for uri, keys in list(self._subscribers.items()):
            keys.discard(key)
            if not keys:
                del self._subscribers[uri]

    def client_callbacks(self) -> ClientCallbacks:
        """Callbacks for the manager: upstream logs, resource updates, sampling and elicitation go downstream."""

        async def on_log(server: str, params: types.LoggingMessageNotificationParams) -> None:
            await self.log(server, params)

        async def on_resource_updated(server: str, uri: str) -> None:
            downstream_uri = self.downstream_uri(server, uri)
            if not self.subscribed(downstream_uri) and self.unwatched is not None:
                self.unwatched(server, uri)
            await self.resource_updated(downstream_uri)

        async def sampling(
            server: str, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            return await self.relay.sampling(server, params)

        async def elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
            return await self.relay.elicitation(server, params)

        return ClientCallbacks(
            on_log=on_log, on_resource_updated=on_resource_updated, sampling=sampling, elicitation=elicitation
        )


def _key(session: ServerSession) -> int:
    """One key per client connection.

    The SDK builds a new ``ServerSession`` for every request; what stays the same for a
    connection is what it holds, such as the client's ``initialize`` parameters.
    """
    params = session.client_params
    return id(params) if params is not None else id(session)
