"""What a transport told us about its own failures, so an error can cite it instead of a symptom.

A child's exit, a closed stream, an HTTP status: each arrives as an exception item on the read
stream (or as the transport's ``exit_code()``), apart from the request it dooms. ``Evidence``
keeps them, and turns a foreign error of a request into the most telling mcpmux error.
"""

from __future__ import annotations

import logging

from mcp.shared.exceptions import MCPError

from mcpmux.connection._errormap import map_error
from mcpmux.connection._streams import StreamWatch
from mcpmux.errors import ConnectionClosed, HTTPStatusError, MessageTooLarge, ServerExited, TransportError
from mcpmux.transports.base import TransportStreams

__all__ = ["Evidence"]

logger = logging.getLogger(__name__)

STDERR_TAIL_CHARS = 400


class Evidence:
    """The faults one connection's transport reported, and the errors they justify."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.streams: TransportStreams | None = None
        self.watch: StreamWatch | None = None
        self.closing = False
        self.fault: TransportError | None = None
        self.status: HTTPStatusError | None = None
        self.statuses = 0

    def record(self, exc: Exception) -> None:
        """Keep a fault the transport put on the read stream (runs inline in the read loop)."""
        logger.debug("server %r: transport reported %r", self.server, exc)
        if isinstance(exc, HTTPStatusError):
            # One request's HTTP status, put just before the JSON-RPC error that hides it.
            self.status, self.statuses = exc, self.statuses + 1
        elif isinstance(exc, MessageTooLarge) and not exc.ends_stream:
            pass  # dropped and logged by the framer; the stream goes on (a waiting request was answered)
        elif isinstance(exc, TransportError):
            if self.fault is None:
                self.fault = exc
        else:
            logger.warning("server %r: transport reported %s: %s", self.server, type(exc).__name__, exc)

    def stderr_tail(self) -> str:
        """The last stderr output of a stdio child (empty for network transports)."""
        return self.streams.stderr_tail() if self.streams is not None else ""

    def of_end(self, during: str) -> TransportError | None:
        """Why the transport ended, if it said: the child's exit, or the first fault it reported."""
        fault = self.fault
        if isinstance(fault, ServerExited):
            return ServerExited(self.server, fault.exit_code, fault.stderr_tail, during=during)
        if fault is not None:
            return fault
        streams = self.streams
        if streams is not None and (code := streams.exit_code()) is not None:
            return ServerExited(self.server, code, streams.stderr_tail(), during=during)
        return None

    def lost(self, during: str) -> TransportError:
        """The error for a transport that ended ``during`` something: the evidence, else ``ConnectionClosed``."""
        evidence = self.of_end(during)
        if evidence is not None:
            return evidence
        tail = self.stderr_tail().strip()
        detail = f"; stderr: {tail[-STDERR_TAIL_CHARS:]}" if tail else ""
        return ConnectionClosed(self.server, f"connection closed {during}".rstrip() + detail)

    def transport_gone(self) -> bool:
        """Whether the transport ended or refused a message, or the connection is closing."""
        watch = self.watch
        return self.closing or watch is None or watch.transport_gone()

    def mapped(self, method: str, exc: Exception, timeout_s: float, statuses_before: int) -> Exception:
        """The mcpmux error for ``exc`` from ``method``, preferring an HTTP status reported meanwhile."""
        if isinstance(exc, MCPError):
            if self.statuses != statuses_before and self.status is not None:
                return self.status  # 401 -> AuthRequired says more than its JSON-RPC echo
            if self.watch is not None and (too_large := self.watch.too_large(exc.data)) is not None:
                return too_large
        return map_error(self.server, method, exc, self.lost, timeout_s, transport_gone=self.transport_gone())
