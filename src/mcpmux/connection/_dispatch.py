"""The SDK's JSON-RPC dispatcher, plus the two facts a connection needs from its receive loop.

It also reads a result without ``resultType`` as ``complete``: SEP-2322 (2026-07-28) makes servers
send it but clients "MUST assume resultType complete when not specified", while the SDK's session
checks results against the revision's schema, where the field is required, and would refuse the
answer. Earlier revisions' schemas accept the field (and the session drops it for them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext

from mcpmux.connection._streams import StreamWatch

__all__ = ["WatchedDispatcher"]


class WatchedDispatcher(JSONRPCDispatcher[TransportContext]):
    """A dispatcher that records transport faults in order and signals when its receive loop ends.

    The fault hook runs inline in the read loop, so a child's ``ServerExited`` is recorded before
    the end of stream wakes the waiting requests: a failed call can always cite it.
    """

    def __init__(self, streams: StreamWatch, on_fault: Callable[[Exception], None]) -> None:
        self._on_fault = on_fault
        self.ended = anyio.Event()
        super().__init__(streams.read, streams.write, on_stream_exception=self._record_fault)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Send a request (see ``JSONRPCDispatcher.send_raw_request``); its result, ``resultType`` defaulted."""
        result = await super().send_raw_request(method, params, opts, **kwargs)
        if isinstance(result, dict) and "resultType" not in result:
            result["resultType"] = "complete"
        return result

    async def _record_fault(self, exc: Exception) -> None:
        self._on_fault(exc)

    async def run(self, *args: Any, **kwargs: Any) -> None:
        """Drive the receive loop (see ``JSONRPCDispatcher.run``); set ``ended`` when it stops."""
        try:
            await super().run(*args, **kwargs)
        finally:
            self.ended.set()
