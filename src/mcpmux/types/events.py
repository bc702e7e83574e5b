"""The manager's event stream: state changes and list changes, for any number of subscribers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpmux.types.models import ServerState

__all__ = ["Event", "EventHub", "ListChanged", "StateChanged"]

logger = logging.getLogger(__name__)

SUBSCRIBER_BUFFER = 256


@dataclass(frozen=True, slots=True)
class StateChanged:
    """A server moved from one state to another."""

    server: str
    old: ServerState
    new: ServerState
    reason: str


@dataclass(frozen=True, slots=True)
class ListChanged:
    """A server's tools, resources or prompts were re-listed and differ from before."""

    server: str
    kind: str


Event = StateChanged | ListChanged


class EventHub:
    """Fan-out of events to subscribers; a subscriber that falls behind loses events, not the hub."""

    def __init__(self) -> None:
        self._subscribers: set[MemoryObjectSendStream[Event]] = set()
        self.dropped = 0

    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber without waiting."""
        for stream in list(self._subscribers):
            try:
                stream.send_nowait(event)
            except anyio.WouldBlock:
                self.dropped += 1
                logger.warning("an event subscriber is %d events behind; dropped %r", SUBSCRIBER_BUFFER, event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(stream)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[MemoryObjectReceiveStream[Event]]:
        """``async with hub.subscribe() as events: async for event in events: ...``."""
        send, receive = anyio.create_memory_object_stream[Event](SUBSCRIBER_BUFFER)
        self._subscribers.add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()

    def close(self) -> None:
        """End every subscription (their ``async for`` loops finish)."""
        for stream in self._subscribers:
            stream.close()
        self._subscribers.clear()
