"""uvicorn's httptools protocol with a deadline and a size cap on each request head.

It also sends a fixed-length response (``content-length``, i.e. every JSON answer) in one write
with its head: uvicorn writes the status line and headers as soon as they are ready and the body
next, which costs a second ``send()`` and wakes the client twice for one response.

uvicorn bounds the idle time between requests (``timeout_keep_alive``) but neither how long a
client may take to send a request line and its headers nor (with httptools) how large they may
grow, so one byte every few seconds would hold a connection forever and a fast client could
grow the header list without bound. :class:`HeadLimitProtocol` closes a connection whose request
head is not complete within ``header_timeout_s`` of the connection (or of the previous
response), and answers 431 to a head larger than :data:`MAX_HEAD_BYTES`.

httptools (llhttp, C) rather than h11 (pure Python): with h11 the gateway spent ~17 % more CPU
per short call (median of 5 interleaved runs, 1,680 vs 1,400 us). uvicorn documents only the
protocol class as an extension point; its protocol's internals are reached through
:class:`~mcpmux._private.uvicorn.HeadHooks`, nowhere here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcpmux._private.uvicorn import HeadHooks

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "MAX_HEAD_BYTES", "HeadLimitProtocol", "protocol_with_deadline"]

logger = logging.getLogger(__name__)

DEFAULT_HEADER_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 64 * 1024
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 32\r\nconnection: close\r\n\r\nRequest header fields too large\n"
)


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over the cap."""


class HeadLimitProtocol(HeadHooks):
    """uvicorn's httptools protocol that closes connections whose request head is too slow or too large.

    The head's size is the request target plus every header name and value, counted as the
    parser reports them; past :data:`MAX_HEAD_BYTES` parsing stops and the answer is 431.
    """

    header_timeout_s = DEFAULT_HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._in_head = True
        self._head_bytes = 0
        self._head_too_large = False

    def head_awaited(self) -> None:
        self._in_head, self._head_bytes = True, 0
        self._disarm()
        self._head_deadline = self.call_later(self.header_timeout_s, self._head_too_slow)

    def head_started(self) -> None:
        self._head_bytes = 0

    def head_grew(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            self._head_too_large = True
            raise _HeadTooLarge

    def head_done(self) -> None:
        self._in_head = False
        self._disarm()

    def response_transport(self, transport: asyncio.Transport) -> asyncio.Transport | _HeadWithBody:
        # A HEAD response has no body write to carry the head (uvicorn skips it).
        return transport if self.method == "HEAD" else _HeadWithBody(transport)

    def parse_failed(self, msg: str) -> bool:
        # uvicorn answers every parser error with 400; a head over the cap gets its own status.
        if not self._head_too_large:
            return False
        logger.info("closing a connection from %s: request head over %d bytes", self.peer, MAX_HEAD_BYTES)
        self.write_raw(_TOO_LARGE)
        self.close()
        return True

    def closed(self) -> None:
        self._disarm()

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self._in_head and not self.is_closing():
            logger.info("closing a connection from %s: request head not received in time", self.peer)
            self.close()


def protocol_with_deadline(header_timeout_s: float) -> type[HeadLimitProtocol]:
    """A :class:`HeadLimitProtocol` subclass with its own deadline (for uvicorn's ``http=``)."""
    return type("HeadLimitProtocol", (HeadLimitProtocol,), {"header_timeout_s": header_timeout_s})


class _HeadWithBody:
    """The part of a transport a response uses, holding a fixed-length response's head for its body.

    Only the first write of a response can be its head. uvicorn lowercases header names, so a
    head that declares its length says ``content-length:``; any other write (a streamed or
    chunked head, a body, a ``100 Continue``) goes out at once.
    """

    __slots__ = ("_head", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        if self._head is not None:
            data, self._head = self._head + data, None
        elif not self._started:
            self._started = True
            if b"\r\ncontent-length: " in data:
                self._head = data
                return
        self._transport.write(data)

    def close(self) -> None:
        if self._head is not None:
            self._transport.write(self._head)
            self._head = None
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()
