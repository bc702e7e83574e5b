"""The SDK's JSON-RPC dispatcher, plus the two facts a connection needs from its receive loop.

(A result without ``resultType`` is read as ``complete`` on its way in, by
:class:`~mcpmux.connection._streams.StreamWatch`: no extra frame per request here.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext

from mcpmux.connection._streams import StreamWatch

__all__ = ["WatchedDispatcher"]


class WatchedDispatcher(JSONRPCDispatcher[TransportContext]):
    """A dispatcher that records transport faults in order and signals when its receive loop ends.

    The fault hook runs inline in the read loop, so a child's ``ServerExited`` is recorded before
    the end of stream wakes the waiting requests: a failed call can always cite it. ``on_end``
    runs when the loop ends (it wakes the lean path's waiters the same way).
    """

    def __init__(
        self, streams: StreamWatch, on_fault: Callable[[Exception], None], *, on_end: Callable[[], None] | None = None
    ) -> None:
        self._on_fault = on_fault
        self._on_end = on_end
        self.ended = anyio.Event()
        self._end_callbacks: list[Callable[[], object]] = []
        super().__init__(streams.read, streams.write, on_stream_exception=self._record_fault)

    async def _record_fault(self, exc: Exception) -> None:
        self._on_fault(exc)

    async def run(self, *args: Any, **kwargs: Any) -> None:
        """Drive the receive loop (see ``JSONRPCDispatcher.run``); set ``ended`` when it stops."""
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
