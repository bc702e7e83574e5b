"""The transport contract: open a pair of SDK message streams for one server.

A transport only moves messages; it knows nothing of tools (STYLE 5). Each transport is an async
context manager yielding :class:`TransportStreams`; leaving the context closes the connection and,
for a child process, stops and reaps it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

__all__ = ["TransportStreams"]


def _no_stderr() -> str:
    return ""


@dataclass
class TransportStreams:
    """What an open transport hands to a session.

    Attributes:
        read: messages (or transport exceptions, as :class:`~mcpmux.errors.TransportError`) from the peer.
        write: messages to the peer.
        describe: a human-readable target, e.g. ``"pid 4242: npx -y pkg"`` or the URL.
        pid: the child's process id, for stdio.
        stderr_tail: returns the last stderr output of a child (empty for network transports).
        exit_code: returns the child's exit code once it has exited, else ``None``.
    """

    read: ReadStream[SessionMessage | Exception]
    write: WriteStream[SessionMessage]
    describe: str
    pid: int | None = None
    stderr_tail: Callable[[], str] = field(default=_no_stderr)
    exit_code: Callable[[], int | None] = field(default=lambda: None)
