"""What a server said about itself at connect time, and how long connecting took."""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types

__all__ = ["ConnectionInfo"]


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What the server said about itself when the connection was made.

    Attributes:
        server_info: name and version (``None`` if a 2026-era server did not say).
        protocol_version: the negotiated version, e.g. ``"2025-11-25"``.
        capabilities: the server's capabilities.
        instructions: the server's usage instructions, if any.
        describe: the transport's description of the peer (pid and command, or URL).
        pid: the child's process id, for stdio.
        transport_s: seconds to open the transport.
        handshake_s: seconds for the handshake (or discovery).
    """

    server_info: types.Implementation | None
    protocol_version: str
    capabilities: types.ServerCapabilities
    instructions: str | None
    describe: str
    pid: int | None
    transport_s: float
    handshake_s: float

    @property
    def connect_s(self) -> float:
        """Seconds from opening the transport to a usable session."""
        return self.transport_s + self.handshake_s
