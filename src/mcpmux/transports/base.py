"""The transport contract: open a pair of SDK message streams for one server.

A transport only moves messages; it knows nothing of tools (STYLE 5). Each transport is an async
context manager yielding :class:`TransportStreams`; leaving the context closes the connection and,
for a child process, stops and reaps it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, Self, TypeVar

from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcpmux.transports.direct import DirectReplies

__all__ = ["ReadStream", "TransportStreams", "WriteStream"]

_T_co = TypeVar("_T_co", covariant=True)
_T_contra = TypeVar("_T_contra", contravariant=True)


# The SDK types its stream parameters with two Protocols it keeps in a private module
# (mcp.shared._stream_protocols); a Protocol matches by shape, so these two, member for member
# the same, are accepted wherever the SDK asks for its own (mypy checks every such call).
class ReadStream(Protocol[_T_co]):
    """A stream of items to read (an anyio memory stream, or one of the SDK's)."""

    async def receive(self) -> _T_co: ...
    async def aclose(self) -> None: ...
    def __aiter__(self) -> ReadStream[_T_co]: ...
    async def __anext__(self) -> _T_co: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None: ...


class WriteStream(Protocol[_T_contra]):
    """A stream of items to write."""

    async def send(self, item: _T_contra, /) -> None: ...
    async def aclose(self) -> None: ...
    async def __aenter__(self) -> Self: ...
    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None: ...


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
        direct: where a connection may send its hot requests past the streams and have the
            reader hand their answers back (:mod:`mcpmux.transports.direct`); ``None`` when the
            transport offers no such path.
    """

    read: ReadStream[SessionMessage | Exception]
    write: WriteStream[SessionMessage]
    describe: str
    pid: int | None = None
    stderr_tail: Callable[[], str] = field(default=_no_stderr)
    exit_code: Callable[[], int | None] = field(default=lambda: None)
    direct: DirectReplies | None = None
