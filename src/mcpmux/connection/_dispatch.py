"""The SDK's JSON-RPC dispatcher, plus the two facts a connection needs from its receive loop.

(A result without ``resultType`` is read as ``complete`` on its way in, by
:class:`~mcpmux.connection._streams.StreamWatch`: no extra frame per request here.)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext

from mcpmux.connection._streams import StreamWatch

__all__ = ["MAX_NOTIFICATIONS_IN_FLIGHT", "NotificationGate", "WatchedDispatcher"]

logger = logging.getLogger(__name__)

MAX_NOTIFICATIONS_IN_FLIGHT = 256
"""Log and progress notifications of one server being handled at once; more are dropped (and counted)."""

_FLOODABLE = frozenset({"notifications/message", "notifications/progress"})
"""What a server may send in bulk and a client can lose: its log lines and its progress reports.

Every other notification (list changes, resource updates, cancellations, a listen stream's events)
is handled as it comes; responses never wait behind any of them (the SDK resolves a response in its
read loop, but wakes its caller behind every handler task spawned before it)."""


class WatchedDispatcher(JSONRPCDispatcher[TransportContext]):
    """A dispatcher that records transport faults in order and signals when its receive loop ends.

    The fault hook runs inline in the read loop, so a child's ``ServerExited`` is recorded before
    the end of stream wakes the waiting requests: a failed call can always cite it. ``on_end``
    runs when the loop ends (it wakes the lean path's waiters the same way).
    """

    def __init__(
        self,
        streams: StreamWatch,
        on_fault: Callable[[Exception], None],
        *,
        on_end: Callable[[], None] | None = None,
        name: str = "",
    ) -> None:
        self._on_fault = on_fault
        self._on_end = on_end
        self.ended = anyio.Event()
        self._end_callbacks: list[Callable[[], object]] = []
        self.gate = NotificationGate(name)
        super().__init__(streams.read, streams.write, on_stream_exception=self._record_fault)

    async def _record_fault(self, exc: Exception) -> None:
        self._on_fault(exc)

    async def run(self, *args: Any, **kwargs: Any) -> None:
        """Drive the receive loop (see ``JSONRPCDispatcher.run``); set ``ended`` when it stops.

        ``run(on_request, on_notify, on_notify_intercept)`` as the SDK's session calls it: the two
        notification hooks go through :class:`NotificationGate` first.
        """
        if len(args) >= 3:
            on_request, on_notify, intercept, *rest = args
            args = (on_request, self.gate.on_notify(on_notify), self.gate.intercept(intercept), *rest)
        try:
            await super().run(*args, **kwargs)
        finally:
            # After the fan-out of "connection closed" to the SDK's waiters; the lean path's follow.
            if self._on_end is not None:
                self._on_end()
            self.ended.set()
            for callback in tuple(self._end_callbacks):
                callback()

    def when_ended(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` once the receive loop ends (at once if it has); return what forgets it."""
        if self.ended.is_set():
            callback()
            return _forgotten
        self._end_callbacks.append(callback)

        def forget() -> None:
            if callback in self._end_callbacks:
                self._end_callbacks.remove(callback)

        return forget


def _forgotten() -> None:
    """Nothing to forget: the callback already ran."""


class NotificationGate:
    """Bounds the handling of a server's log and progress notifications, so a flood never starves an answer.

    The SDK spawns a task per notification and wakes a waiting caller behind all of them: 100,000 log
    lines before a result were 100,000 tasks to run (and hold in memory) first. The gate admits a
    floodable notification while fewer than :data:`MAX_NOTIFICATIONS_IN_FLIGHT` are being handled
    and drops the rest, counting them per method (``dropped``) and saying so in the log (the first
    drop, then every 10,000th).
    """

    def __init__(self, server: str, limit: int = MAX_NOTIFICATIONS_IN_FLIGHT) -> None:
        self.server, self.limit = server, limit
        self.in_flight = 0
        self.dropped: Counter[str] = Counter()

    def intercept(
        self, inner: Callable[[str, Mapping[str, Any] | None], bool] | None
    ) -> Callable[[str, Mapping[str, Any] | None], bool]:
        """The receive-order intercept: the session's own first, then admission of floodable ones."""

        def admit(method: str, params: Mapping[str, Any] | None) -> bool:
            if inner is not None and inner(method, params):
                return True
            if method not in _FLOODABLE:
                return False
            if self.in_flight >= self.limit:
                self.dropped[method] += 1
                total = sum(self.dropped.values())
                if total == 1 or total % 10_000 == 0:
                    logger.warning(
                        "server %r sends notifications faster than they are handled: dropped %d log/progress "
                        "notifications so far (more than %d in flight)",
                        self.server, total, self.limit,
                    )  # fmt: skip
                return True
            self.in_flight += 1
            return False

        return admit

    def on_notify(self, inner: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        """The spawned handler: the session's, then the admitted one's place freed."""

        async def handle(dctx: Any, method: str, params: Mapping[str, Any] | None) -> None:
            try:
                await inner(dctx, method, params)
            finally:
                if method in _FLOODABLE:
                    self.in_flight -= 1

        return handle
