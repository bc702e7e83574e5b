"""Map the SDK's exceptions to mcpmux's tree, where they are met (STYLE 6)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcpmux.errors import MCPMuxError, MCPTimeoutError, ProtocolError, ServerError, TransportError

__all__ = ["FOREIGN_ERRORS", "is_closed_signal", "map_error"]

FOREIGN_ERRORS = (
    MCPError,
    ValidationError,
    RuntimeError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)
"""What the SDK and anyio raise from a request; ``map_error`` knows each."""

# RuntimeErrors the SDK raises for a broken answer (output schema, unexpected input_required).
_PROTOCOL_RUNTIME_MARKERS = ("structured content", "schema", "InputRequiredResult", "resultType")


def map_error(
    server: str,
    method: str,
    exc: Exception,
    lost: Callable[[str], TransportError],
    timeout_s: float,
    *,
    transport_gone: bool,
) -> MCPMuxError | Exception:
    """Return the mcpmux error for ``exc`` raised by ``method``, or ``exc`` itself if it is not foreign.

    ``lost`` builds the error for a transport that ended (with the child's exit and stderr, if any);
    ``timeout_s`` is the deadline the request had; ``transport_gone`` says whether the transport
    ended (or the connection is closing), which alone makes a ``-32000`` the SDK's "connection closed".
    """
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED and transport_gone and is_closed_signal(exc):
            return lost(f"during {method}")
        if _is_sdk_timeout(exc):
            return MCPTimeoutError(server, method, timeout_s)
        return ServerError(server, method, exc.code, exc.message, exc.data)
    if isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream):
        return lost(f"during {method}")
    if isinstance(exc, ValidationError):
        first = exc.errors()[0] if exc.error_count() else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in first["loc"])
        return ProtocolError(server, f"invalid {method} answer at {where or 'top level'}: {first['msg']}")
    if isinstance(exc, RuntimeError) and any(m in str(exc) for m in _PROTOCOL_RUNTIME_MARKERS):
        return ProtocolError(server, f"{method}: {exc}")
    return exc


def is_closed_signal(exc: MCPError) -> bool:
    """Whether ``exc`` looks like the SDK's own "connection closed" (a server may send -32000 too)."""
    # The SDK matches its closed outcome by identity, lost by the time it is raised; its shape is exact.
    return exc.code == types.CONNECTION_CLOSED and exc.message == "Connection closed" and exc.data is None


def _is_sdk_timeout(exc: MCPError) -> bool:
    # The SDK's own deadline (it already sent notifications/cancelled), told apart from a server's -32001.
    text = exc.message
    return exc.code == types.REQUEST_TIMEOUT and text.startswith("Request '") and text.endswith("' timed out")
