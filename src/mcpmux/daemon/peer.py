"""Who is on the other end of a Unix socket: ``SO_PEERCRED`` (pid, uid, gid), checked by the kernel.

Only processes of the daemon's own user are served; the pid names the client in the audit log.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

__all__ = ["PeerCredentials", "peer_credentials"]

_UCRED = struct.Struct("3i")


@dataclass(frozen=True, slots=True)
class PeerCredentials:
    """The process that connected, as the kernel saw it when it called ``connect``."""

    pid: int
    uid: int
    gid: int

    @property
    def same_user(self) -> bool:
        """Whether the peer runs as the daemon's user."""
        return self.uid == os.getuid()


def peer_credentials(sock: socket.socket) -> PeerCredentials:
    """The credentials of ``sock``'s peer.

    Raises:
        OSError: the socket is not a connected Unix socket.
    """
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid, uid, gid)
