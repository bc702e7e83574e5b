"""Where a child's stderr goes: a ring buffer, the per-server log file and a logger."""

from __future__ import annotations

import asyncio
import logging
import os
from contextlib import suppress
from typing import BinaryIO

import anyio
from anyio.abc import ByteReceiveStream

from mcpmux.config.display import redact
from mcpmux.config.paths import server_log_file

__all__ = ["LOG_FILE_MAX_BYTES", "STDERR_TAIL_BYTES", "StderrSink"]

STDERR_TAIL_BYTES = 64 * 1024
LOG_FILE_MAX_BYTES = 8 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024
# A secret is masked line by line; a line longer than this is masked and written in pieces, so a
# secret that straddles such a cut could show (a child that writes 64 KiB without a newline).
MAX_PENDING_LINE_BYTES = 64 * 1024
_made_dirs: set[str] = set()
"""Log directories made by this process (made again only when one is found missing)."""


class StderrSink:
    """Collects one child's stderr: last 64 KiB in memory, all of it in a size-capped log file.

    The log file rotates once to ``<name>.log.1`` when it passes :data:`LOG_FILE_MAX_BYTES`, so a
    chatty server costs at most twice that on disk. ``secrets`` (the values the child was given from
    the environment) and prefixed tokens are masked before anything is kept, logged or written.
    """

    def __init__(self, server: str, secrets: frozenset[str] = frozenset()) -> None:
        self.server = server
        self._secrets = secrets
        self._pending = bytearray()
        self.path = server_log_file(server)
        self.done = anyio.Event()
        self._tail = bytearray()
        self._logger_made: logging.Logger | None = None
        self._file: BinaryIO | None = None
        self._written = 0
        self._followed: tuple[int, asyncio.AbstractEventLoop] | None = None

    @property
    def _logger(self) -> logging.Logger:
        # Got when first used: a quiet child (most of 50 starting at once) never makes one.
        if self._logger_made is None:
            self._logger_made = logging.getLogger(f"mcpmux.server.{self.server}")
        return self._logger_made

    def tail(self) -> str:
        """The last stderr output (up to 64 KiB), decoded leniently."""
        return self._tail.decode("utf-8", "replace")

    def follow(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        """Read the pipe ``fd`` to its end from ``loop``'s reader callback; the sink owns ``fd`` from now.

        No task, stream or transport per child (asyncio; :meth:`drain` elsewhere): a stdio server
        keeps ~30 objects fewer alive, and each read is one ``os.read``. :meth:`unfollow` stops early.
        """
        self._followed = (fd, loop)  # first: unfollow() closes it, whatever fails below
        os.set_blocking(fd, False)
        self._open_logged()
        loop.add_reader(fd, self._readable)

    def unfollow(self) -> None:
        """Stop following (idempotent): close the pipe, keep what came, set :attr:`done`."""
        if self._followed is None:
            return
        (fd, loop), self._followed = self._followed, None
        loop.remove_reader(fd)
        os.close(fd)
        self._flush_pending()
        self.close()
        self.done.set()

    def _readable(self) -> None:
        assert self._followed is not None, "called only while registered"
        try:
            chunk = os.read(self._followed[0], READ_CHUNK_BYTES)
        except BlockingIOError:
            return  # woken for nothing
        except OSError as exc:  # EIO and the like: the pipe is unusable, as at its end
            self._logger.debug("reading stderr failed: %r", exc)
            chunk = b""
        if chunk:
            self._receive(chunk)
        else:
            self.unfollow()

    async def drain(self, source: ByteReceiveStream) -> None:
        """Read ``source`` to its end, never blocking the child for longer than a file write."""
        try:
            self._open_logged()
            while True:
                try:
                    chunk = await source.receive(READ_CHUNK_BYTES)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                self._receive(chunk)
        finally:
            self._flush_pending()
            self.close()
            self.done.set()

    def close(self) -> None:
        """Close the log file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _open_logged(self) -> None:
        try:
            self._open()
        except OSError as exc:
            self._logger.warning("cannot write the stderr log %s: %s; keeping only the in-memory tail", self.path, exc)

    def _open(self) -> None:
        # Few system calls per start (50 servers start at once): the directory is made the first
        # time only, and the size read from the open file.
        directory = str(self.path.parent)
        if directory not in _made_dirs:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _made_dirs.add(directory)
        try:
            file: BinaryIO = open(self.path, "ab")  # noqa: SIM115 - kept open until close()
        except FileNotFoundError:  # the directory was removed since: make it again
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file = open(self.path, "ab")  # noqa: SIM115
        size = os.fstat(file.fileno()).st_size
        if size >= LOG_FILE_MAX_BYTES:
            file.close()
            self.path.replace(self.path.with_name(self.path.name + ".1"))
            file, size = open(self.path, "ab"), 0  # noqa: SIM115
        self._file, self._written = file, size

    def _receive(self, chunk: bytes) -> None:
        self._pending += chunk
        end = self._pending.rfind(b"\n") + 1
        if end == 0 and len(self._pending) < MAX_PENDING_LINE_BYTES:
            return
        cut = end or len(self._pending)
        lines = bytes(self._pending[:cut])
        del self._pending[:cut]
        self._record(self._masked(lines))

    def _flush_pending(self) -> None:
        if self._pending:
            self._record(self._masked(bytes(self._pending)))
            self._pending.clear()

    def _masked(self, data: bytes) -> bytes:
        text = data.decode("utf-8", "replace")
        masked = redact(text, self._secrets)
        return data if masked == text else masked.encode("utf-8")

    def _record(self, chunk: bytes) -> None:
        self._tail += chunk
        if len(self._tail) > STDERR_TAIL_BYTES:
            del self._tail[: len(self._tail) - STDERR_TAIL_BYTES]
        if self._file is not None:
            try:
                self._file.write(chunk)
                self._file.flush()
            except OSError as exc:  # a full disk, say: the tail and the logger go on without the file
                self._logger.warning(
                    "cannot write the stderr log %s: %s; keeping only the in-memory tail", self.path, exc
                )
                file, self._file = self._file, None
                with suppress(OSError):  # its close flushes the same unwritable bytes: the error above
                    file.close()
            else:
                self._written += len(chunk)
                if self._written >= LOG_FILE_MAX_BYTES:
                    self.close()
                    self._open_logged()
        if self._logger.isEnabledFor(logging.DEBUG):
            for line in chunk.decode("utf-8", "replace").splitlines():
                self._logger.debug("%s", line)
