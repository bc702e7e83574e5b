"""The byte relay of ``mcpmux connect`` once attached: stdin to the daemon's socket, the socket to stdout.

``mcpmux connect`` loads the configuration and attaches (:mod:`.shim`), then replaces itself
(``exec``, so the host still sees the process it started) with ``python -m mcpmux.daemon.relay FD``,
FD being the attached socket. This module imports the standard library only: a host session then
costs a bare interpreter (about 10 MB), not a gateway; the daemon serves the session.

One thread, ``poll``: stdin is read only while the socket can take what was read, the socket only
while stdout can take it, so a host that stops reading slows the daemon down, not memory up. Exit 0
when the host closed stdin (after the daemon finished answering) or stdout; exit 3 with one line on
stderr when the daemon closed first (stopped or killed): the host restarts it like any server.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys

__all__ = ["CHUNK_BYTES", "GONE", "relay"]

CHUNK_BYTES = 64 * 1024
GONE = "mcpmux connect: the daemon closed the connection (stopped or killed)"
EXIT_OK, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 3, 130  # as mcpmux.errors (not imported: it is not light)
_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
_WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR


class _HostGone(Exception):
    """stdout was closed by the host: nothing is left to relay to."""


def relay(sock: socket.socket, stdin: int = 0, stdout: int = 1) -> int:
    """Copy ``stdin`` to ``sock`` and ``sock`` to ``stdout`` until the host or the daemon ends; the exit code."""
    blocking = {fd: os.get_blocking(fd) for fd in (stdin, stdout)}
    for fd in blocking:
        os.set_blocking(fd, False)
    sock.setblocking(False)
    state = _Relay(sock, stdin, stdout)
    try:
        state.run()
    except _HostGone:
        return EXIT_OK
    finally:
        sock.close()
        for fd, was in blocking.items():  # a terminal shared with the shell is left as it was found
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was)
    if state.stdin_open:
        sys.stderr.write(GONE + "\n")
        sys.stderr.flush()
        return EXIT_UNREACHABLE
    return EXIT_OK


class _Relay:
    """The two buffers (``up`` to the daemon, ``down`` to the host) and which ends are still open."""

    def __init__(self, sock: socket.socket, stdin: int, stdout: int) -> None:
        self.sock, self.stdin, self.stdout = sock, stdin, stdout
        self.up, self.down = bytearray(), bytearray()
        self.stdin_open = self.sock_open = True
        self.shut = False
        self.poller = select.poll()
        self.registered: set[int] = set()

    def run(self) -> None:
        """Relay until the daemon's end is closed and all it sent is written (:class:`_HostGone`: stdout closed)."""
        while True:
            if not self.stdin_open and not self.up and not self.shut:
                _shutdown(self.sock)  # the daemon ends the session once it answered what was asked
                self.shut = True
            if not self.sock_open and not self.down:
                return
            self._register(self._interest())
            for fd, events in self.poller.poll():
                self._ready(fd, events)

    def _interest(self) -> dict[int, int]:
        """What to wait for: read only where the next buffer has room, write only what is buffered."""
        wanted = [
            (self.stdin, select.POLLIN, self.stdin_open and len(self.up) < CHUNK_BYTES),
            (self.sock.fileno(), select.POLLOUT, bool(self.up) and self.sock_open),
            (self.sock.fileno(), select.POLLIN, self.sock_open and len(self.down) < CHUNK_BYTES),
            (self.stdout, select.POLLOUT, bool(self.down)),
        ]
        interest: dict[int, int] = {}
        for fd, event, wanted_now in wanted:
            if wanted_now:
                interest[fd] = interest.get(fd, 0) | event
        return interest

    def _register(self, interest: dict[int, int]) -> None:
        for fd in self.registered - interest.keys():
            self.poller.unregister(fd)
        for fd, mask in interest.items():
            self.poller.register(fd, mask)
        self.registered = set(interest)

    def _ready(self, fd: int, events: int) -> None:
        if fd == self.stdin and events & _READABLE:
            self._from_host()
        if fd == self.sock.fileno() and events & _WRITABLE:
            self._to_daemon()
        if fd == self.sock.fileno() and events & _READABLE:
            self._from_daemon()
        if fd == self.stdout and events & _WRITABLE and self.down:
            del self.down[: _write(self.stdout, self.down)]

    def _from_host(self) -> None:
        if not (self.stdin_open and len(self.up) < CHUNK_BYTES):
            return
        data = _read(self.stdin)
        if data is not None:
            self.up += data
            self.stdin_open = bool(data)

    def _to_daemon(self) -> None:
        if not (self.up and self.sock_open):
            return
        sent = _send(self.sock, self.up)
        if sent is None:
            self.sock_open = False  # the daemon went away while the host was talking
            self.up.clear()
        else:
            del self.up[:sent]

    def _from_daemon(self) -> None:
        if not (self.sock_open and len(self.down) < CHUNK_BYTES):
            return
        data = _recv(self.sock)
        if data is not None:
            self.down += data
            self.sock_open = bool(data)


def _read(fd: int) -> bytes | None:
    """Up to a chunk from ``fd``; ``b""`` at its end, ``None`` if nothing was there after all."""
    try:
        return os.read(fd, CHUNK_BYTES)
    except BlockingIOError:
        return None
    except OSError:
        return b""  # an input that broke ends like one that closed


def _write(fd: int, data: bytearray) -> int:
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0
    except OSError as exc:  # EPIPE, EIO: the host closed its end
        raise _HostGone from exc


def _send(sock: socket.socket, data: bytearray) -> int | None:
    """Bytes sent, or ``None`` when the daemon's end is closed."""
    try:
        return sock.send(data)
    except BlockingIOError:
        return 0
    except OSError:
        return None


def _recv(sock: socket.socket) -> bytes | None:
    """Up to a chunk; ``b""`` when the daemon closed (or reset) the connection, ``None`` if nothing was there."""
    try:
        return sock.recv(CHUNK_BYTES)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the daemon: the loop sees its end next
        sock.shutdown(socket.SHUT_WR)


def main(argv: list[str]) -> int:
    """``python -m mcpmux.daemon.relay FD``."""
    if len(argv) != 1 or not argv[0].isdigit():
        sys.stderr.write("usage: python -m mcpmux.daemon.relay FD (run by `mcpmux connect`, not by hand)\n")
        return 2
    try:
        sock = socket.socket(fileno=int(argv[0]))
    except OSError as exc:
        sys.stderr.write(f"mcpmux connect: file descriptor {argv[0]} is not the daemon's socket: {exc}\n")
        return EXIT_UNREACHABLE
    try:
        return relay(sock)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
