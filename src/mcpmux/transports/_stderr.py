"""Where a child's stderr goes: a ring buffer, the per-server log file and a logger."""

from __future__ import annotations

import logging
from typing import BinaryIO

import anyio
from anyio.abc import ByteReceiveStream

from mcpmux.config.paths import server_log_file

__all__ = ["LOG_FILE_MAX_BYTES", "STDERR_TAIL_BYTES", "StderrSink"]

STDERR_TAIL_BYTES = 64 * 1024
LOG_FILE_MAX_BYTES = 8 * 1024 * 1024
READ_CHUNK_BYTES = 64 * 1024


class StderrSink:
    """Collects one child's stderr: last 64 KiB in memory, all of it in a size-capped log file.

    The log file rotates once to ``<name>.log.1`` when it passes :data:`LOG_FILE_MAX_BYTES`, so a
    chatty server costs at most twice that on disk.
    """

    def __init__(self, server: str) -> None:
        self.server = server
        self.path = server_log_file(server)
        self.done = anyio.Event()
        self._tail = bytearray()
        self._logger = logging.getLogger(f"mcpmux.server.{server}")
        self._file: BinaryIO | None = None
        self._written = 0

    def tail(self) -> str:
        """The last stderr output (up to 64 KiB), decoded leniently."""
        return self._tail.decode("utf-8", "replace")

    async def drain(self, source: ByteReceiveStream) -> None:
        """Read ``source`` to its end, never blocking the child for longer than a file write."""
        try:
            self._open_logged()
            while True:
                try:
                    chunk = await source.receive(READ_CHUNK_BYTES)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                self._record(chunk)
        finally:
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size >= LOG_FILE_MAX_BYTES:
            self.path.replace(self.path.with_name(self.path.name + ".1"))
        self._file = self.path.open("ab")
        self._written = self.path.stat().st_size

    def _record(self, chunk: bytes) -> None:
        self._tail += chunk
        if len(self._tail) > STDERR_TAIL_BYTES:
            del self._tail[: len(self._tail) - STDERR_TAIL_BYTES]
        if self._file is not None:
            self._file.write(chunk)
            self._file.flush()
            self._written += len(chunk)
            if self._written >= LOG_FILE_MAX_BYTES:
                self.close()
                self._open_logged()
        if self._logger.isEnabledFor(logging.DEBUG):
            for line in chunk.decode("utf-8", "replace").splitlines():
                self._logger.debug("%s", line)
