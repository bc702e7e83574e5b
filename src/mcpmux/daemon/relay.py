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
    up, down = bytearray(), bytearray()
    stdin_open = sock_open = True
    shut = False
    poller = select.poll()
    registered: set[int] = set()
    try:
        while True:
            if not stdin_open and not up and not shut:
                _shutdown(sock)  # the daemon ends the session once it answered what was asked
                shut = True
            if not sock_open and not down:
                break
            interest: dict[int, int] = {}
            if stdin_open and len(up) < CHUNK_BYTES:
                interest[stdin] = interest.get(stdin, 0) | select.POLLIN
            if up and sock_open:
                interest[sock.fileno()] = interest.get(sock.fileno(), 0) | select.POLLOUT
            if sock_open and len(down) < CHUNK_BYTES:
                interest[sock.fileno()] = interest.get(sock.fileno(), 0) | select.POLLIN
            if down:
                interest[stdout] = interest.get(stdout, 0) | select.POLLOUT
            for fd in registered - interest.keys():
                poller.unregister(fd)
            for fd, mask in interest.items():
                poller.register(fd, mask)
            registered = set(interest)
            for fd, events in poller.poll():
                if fd == stdin and events & _READABLE and stdin_open and len(up) < CHUNK_BYTES:
                    data = _read(stdin)
                    if data is None:
                        continue
                    up += data
                    stdin_open = bool(data)
                if fd == sock.fileno() and events & _WRITABLE and up and sock_open:
                    sent = _send(sock, up)
                    if sent is None:
                        sock_open = False  # the daemon went away while the host was talking
                        up.clear()
                    else:
                        del up[:sent]
                if fd == sock.fileno() and events & _READABLE and sock_open and len(down) < CHUNK_BYTES:
                    data = _recv(sock)
                    if data is not None:
                        down += data
                        sock_open = bool(data)
                if fd == stdout and events & _WRITABLE and down:
                    del down[: _write(stdout, down)]
    except _HostGone:
        return EXIT_OK
    finally:
        sock.close()
        for fd, was in blocking.items():  # a terminal shared with the shell is left as it was found
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was)
    if stdin_open:
        sys.stderr.write(GONE + "\n")
        sys.stderr.flush()
        return EXIT_UNREACHABLE
    return EXIT_OK


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
