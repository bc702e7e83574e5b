"""A header deadline for uvicorn's h11 protocol: a client must finish its request head in time.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) and the size of an
incomplete head (``h11_max_incomplete_event_size``) but not how long a client may take to send
it, so one byte every few seconds would hold a connection forever. This protocol closes a
connection whose request line and headers are not complete within ``HEADER_TIMEOUT_S`` of the
connection (or of the previous response).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "HeaderDeadlineProtocol", "protocol_with_deadline"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_S = 10.0


class HeaderDeadlineProtocol(H11Protocol):
    """:class:`H11Protocol` that closes connections whose request head arrives too slowly."""

    header_timeout_s = DEFAULT_HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            logger.info("closing a connection from %s: request head not received in time", self.client)
            self.transport.close()


def protocol_with_deadline(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """A :class:`HeaderDeadlineProtocol` subclass with its own deadline (for uvicorn's ``http=``)."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s})
