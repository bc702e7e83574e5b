"""The stateless era's change notifications: one ``subscriptions/listen`` stream per connection.

A 2026-07-28 server sends nothing unsolicited: list changes and resource updates reach a client
only on a ``subscriptions/listen`` stream whose filter the client states when it opens it
(SEP-2575). A :class:`Listener` keeps one such stream open for what the server offers
(``listChanged`` of tools, prompts, resources) and the resources subscribed to. The SDK hands
each event on to the session's message handler as the notification it stands for, so the
handshake era's router reaches the same callbacks and the layers above see one behaviour in both
eras (the stream itself is only drained here). A filter cannot be amended: a changed set of subscriptions reopens the
stream (an event between the two is lost, as on any re-listen: the spec has no replay).
"""

from __future__ import annotations

import logging

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.subscriptions import ListenNotSupportedError, Subscription, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError

from mcpmux.errors import ProtocolError

__all__ = ["FIRST_LISTEN_TIMEOUT_S", "RELISTEN_DELAY_S", "Listener"]

logger = logging.getLogger(__name__)

RELISTEN_DELAY_S = 1.0
"""The pause before reopening a stream the server dropped (the connection itself may be ending)."""

FIRST_LISTEN_TIMEOUT_S = 5.0
"""How long connecting waits for the first stream's acknowledgment (a change before it would be lost)."""


class Listener:
    """The ``subscriptions/listen`` stream of one stateless-era connection.

    Args:
        server: the server's name (for logs and errors).
        session: the connection's entered SDK session (2026-07-28 era).
    """

    def __init__(self, server: str, session: ClientSession) -> None:
        self.server, self.session = server, session
        capabilities = session.server_capabilities or types.ServerCapabilities()
        self._lists = {
            "tools_list_changed": bool(capabilities.tools and capabilities.tools.list_changed),
            "prompts_list_changed": bool(capabilities.prompts and capabilities.prompts.list_changed),
            "resources_list_changed": bool(capabilities.resources and capabilities.resources.list_changed),
        }
        self.can_subscribe = bool(capabilities.resources and capabilities.resources.subscribe)
        self._uris: set[str] = set()
        self._wanted = 0
        """Bumped at each change of the filter; :meth:`run` reopens the stream when it moves."""
        self._changed = anyio.Event()
        self._opened: dict[int, anyio.Event] = {0: anyio.Event()}
        self._failure: Exception | None = None

    async def first_opened(self) -> None:
        """Wait until the first stream is open (or refused): changes from then on are not missed."""
        opened = self._opened.get(0)
        if opened is not None:
            await opened.wait()

    async def run(self) -> None:
        """Keep a stream open with the current filter until cancelled (the connection closes)."""
        while True:
            generation, self._changed = self._wanted, anyio.Event()
            filters = dict(self._lists, resource_subscriptions=sorted(self._uris))
            if any(filters.values()):
                await self._listen(generation, filters)
            else:
                self._settle(generation, None)
                await self._changed.wait()

    async def _listen(self, generation: int, filters: dict[str, object]) -> None:
        try:
            async with listen(self.session, **filters) as subscription:  # type: ignore[arg-type]
                self._settle(generation, None)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._pump, subscription, tg.cancel_scope)
                    await self._changed.wait()
                    tg.cancel_scope.cancel()
        except SubscriptionLost as exc:
            logger.info("server %r dropped its subscriptions/listen stream; listening again: %s", self.server, exc)
            await anyio.sleep(RELISTEN_DELAY_S)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            # The transport is gone: the connection ends and says why; nothing to listen to until then.
            logger.info("server %r: subscriptions/listen stream lost with its transport: %r", self.server, exc)
            self._settle(generation, exc)
            await self._changed.wait()
        except (MCPError, ListenNotSupportedError, TimeoutError) as exc:
            # Refused (e.g. -32601): not asked again until the filter changes.
            logger.warning("server %r refused subscriptions/listen: %s", self.server, exc)
            self._settle(generation, exc)
            await self._changed.wait()

    async def _pump(self, subscription: Subscription, scope: anyio.CancelScope) -> None:
        # Each event also reaches the message handler (the SDK tees it): acting here too would
        # deliver it twice. Draining keeps the stream's buffer from filling up.
        try:
            async for event in subscription:
                logger.debug("server %r: %r", self.server, event)
        except SubscriptionLost as exc:
            logger.info("server %r dropped its subscriptions/listen stream; listening again: %s", self.server, exc)
            await anyio.sleep(RELISTEN_DELAY_S)
        # Closed by the server, gracefully or not: the loop in run() opens a new stream.
        self._changed.set()
        scope.cancel()

    def _settle(self, generation: int, failure: Exception | None) -> None:
        self._failure = failure
        for wanted in [g for g in self._opened if g <= generation]:
            self._opened.pop(wanted).set()

    async def subscribe(self, uri: str) -> None:
        """Add ``uri`` to the stream's filter; return once the server acknowledged it.

        Raises:
            ProtocolError: the server offers no resource subscriptions, or refused the stream.
        """
        if not self.can_subscribe:
            raise ProtocolError(
                self.server,
                f"cannot subscribe to {uri}: this 2026-07-28 server offers no resource subscriptions "
                "(its capabilities lack resources.subscribe, served through subscriptions/listen)",
            )
        self._uris.add(uri)
        await self._refilter()
        if self._failure is not None:
            self._uris.discard(uri)
            raise ProtocolError(self.server, f"cannot subscribe to {uri}: subscriptions/listen failed: {self._failure}")

    async def unsubscribe(self, uri: str) -> None:
        """Drop ``uri`` from the stream's filter."""
        if uri in self._uris:
            self._uris.discard(uri)
            await self._refilter()

    async def _refilter(self) -> None:
        self._wanted += 1
        opened = self._opened.setdefault(self._wanted, anyio.Event())
        self._changed.set()
        await opened.wait()
