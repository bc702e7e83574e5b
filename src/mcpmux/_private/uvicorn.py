"""The undocumented parts of uvicorn (tested with 0.54) that mcpmux needs, and only here.

uvicorn's public extension point for HTTP is the protocol class given as ``Config(http=...)``;
its built-in protocols' parser callbacks and request cycle are not documented. Why each part is
needed and what would replace it:

- :class:`HeadHooks` subclasses ``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol`` and
  turns the life of a request head into hooks: the gateway bounds how long a head may take and
  how large it may grow (:mod:`mcpmux.web.slowloris`), which uvicorn does not (with httptools),
  and sends a fixed-length response's head and body in one write. It overrides the parser
  callbacks ``on_message_begin``, ``on_url``, ``on_header``, ``on_headers_complete``,
  ``on_response_complete``, ``send_400_response`` and the protocol's ``connection_made`` and
  ``connection_lost``, and reads ``transport``, ``loop``, ``client``, ``scope`` and ``cycle``
  (and the cycle's ``transport`` and ``response_complete``). A header timeout and a head size cap
  in uvicorn's ``Config`` would replace the first use; nothing public replaces the second.
- :class:`QuietServer` overrides ``uvicorn.Server.capture_signals`` (undocumented) so that
  ``mcpmux serve`` keeps its own SIGTERM and SIGINT handlers. A ``Config`` switch for signal
  handling would replace it.

:data:`PRIVATE_NAMES` lists every one of them for ``tests/test_private_apis.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Generator
from typing import Any, Final

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["CALLED_BY", "DISTRIBUTION", "PRIVATE_NAMES", "HeadHooks", "QuietServer", "ResponseTransport"]

DISTRIBUTION: Final = "uvicorn"

_PROTOCOL = "uvicorn.protocols.http.httptools_impl.HttpToolsProtocol"
_CYCLE = "uvicorn.protocols.http.httptools_impl.RequestResponseCycle"
PRIVATE_NAMES: Final[dict[str, str | None]] = {
    # A name and the parameters it is called with (``None``: a class, or an attribute we read).
    # ``Class#attr`` is an attribute of an instance serving a request.
    _PROTOCOL: None,
    f"{_PROTOCOL}.connection_made": "self, transport",
    f"{_PROTOCOL}.connection_lost": "self, exc",
    f"{_PROTOCOL}.on_message_begin": "self",
    f"{_PROTOCOL}.on_url": "self, url",
    f"{_PROTOCOL}.on_header": "self, name, value",
    f"{_PROTOCOL}.on_headers_complete": "self",
    f"{_PROTOCOL}.on_response_complete": "self",
    f"{_PROTOCOL}.send_400_response": "self, msg",
    f"{_PROTOCOL}#transport": None,
    f"{_PROTOCOL}#loop": None,
    f"{_PROTOCOL}#client": None,
    f"{_PROTOCOL}#scope": None,
    f"{_PROTOCOL}#cycle": None,
    f"{_CYCLE}#transport": None,
    f"{_CYCLE}#response_complete": None,
    "uvicorn.Server.capture_signals": "self",
}
CALLED_BY: Final[dict[str, str]] = {
    # An override, and the uvicorn function that must still call it (or the override does nothing).
    f"{_PROTOCOL}.send_400_response": f"{_PROTOCOL}.data_received",
    "uvicorn.Server.capture_signals": "uvicorn.Server.serve",
}

ResponseTransport = Callable[[asyncio.Transport], Any]
"""Wraps the transport a response is written to (it needs ``write``, ``close``, ``is_closing``)."""


class HeadHooks(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the life of each request head as overridable hooks.

    Every hook does nothing by default. A hook may close the connection (:meth:`close`); a
    :meth:`head_grew` that raises stops the parser, which then calls :meth:`parse_failed`.
    """

    # -- hooks ----------------------------------------------------------------------------------

    def head_awaited(self) -> None:
        """A request head is due: the connection opened, or the previous response completed."""

    def head_started(self) -> None:
        """The parser met the start of a request."""

    def head_grew(self, size: int) -> None:
        """The parser read ``size`` more bytes of the head (the target, or a header name and value)."""

    def head_done(self) -> None:
        """The head is complete (its request is about to be served)."""

    def parse_failed(self, msg: str) -> bool:
        """The request cannot be parsed; return ``True`` once answered, else uvicorn answers 400."""
        return False

    def response_transport(self, transport: asyncio.Transport) -> asyncio.Transport | Any:
        """What this request's response is written to (by default ``transport`` itself)."""
        return transport

    def closed(self) -> None:
        """The connection is gone."""

    # -- what the hooks may use ----------------------------------------------------------------

    @property
    def peer(self) -> tuple[str, int] | None:
        """The client's address."""
        client: tuple[str, int] | None = self.client
        return client

    @property
    def method(self) -> str:
        """The method of the request being served."""
        method: str = self.scope["method"]
        return method

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """Run ``callback`` on the connection's loop after ``delay_s``."""
        return self.loop.call_later(delay_s, callback)

    def is_closing(self) -> bool:
        """Whether the connection is closing or closed."""
        return self.transport.is_closing()

    def write_raw(self, data: bytes) -> None:
        """Write ``data`` straight to the connection."""
        self.transport.write(data)

    def close(self) -> None:
        """Close the connection."""
        self.transport.close()

    # -- uvicorn's callbacks, mapped to the hooks ----------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.head_awaited()

    def on_message_begin(self) -> None:
        self.head_started()
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self.head_grew(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_grew(len(name) + len(value))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.head_done()
        super().on_headers_complete()
        if self.cycle is not None:
            self.cycle.transport = self.response_transport(self.cycle.transport)

    def send_400_response(self, msg: str) -> None:
        if not self.parse_failed(msg):
            super().send_400_response(msg)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request already parsed may have started: its head is complete.
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self.head_awaited()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed()
        super().connection_lost(exc)


class QuietServer(uvicorn.Server):
    """uvicorn without its signal handlers: the application owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield
