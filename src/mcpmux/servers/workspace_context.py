"""What every workspace tool shares: the confinement, the limits, the scratch dir, the sandbox hook."""

from __future__ import annotations

import errno
import functools
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.processes.confinement import Confinement

__all__ = ["SandboxHook", "WorkspaceContext", "WorkspaceLimits", "check_cancelled", "open_regular", "os_errors"]

T = TypeVar("T")
# Never blocks on a FIFO or a device, never follows a final symlink (the confinement walks those).
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

SandboxHook = Callable[[Sequence[str], Path], list[str]]
"""Wraps a command before it runs: gets ``(argv, cwd)``, returns the argv to execute instead
(e.g. ``["bwrap", ..., "--", *argv]``). The guard layer supplies it when the sandbox is on."""


@dataclass(frozen=True, slots=True)
class WorkspaceLimits:
    """Caps that keep one tool result small enough for a model's context.

    Attributes:
        max_read_bytes: ``read_file`` refuses files above this size unless a line range is given.
        max_output_chars: text returned by one call (file text, listings, grep, command output).
        max_results: entries returned by ``glob``, ``grep`` and ``list_directory``.
        max_grep_file_bytes: ``grep`` skips files above this size.
        max_line_bytes: ``read_file`` cuts a longer line (and reads no further into it).
        worker_threads: file tools of one workspace running at once; more calls wait, so a slow
            disk cannot take every worker thread of the host.
        default_timeout_s: default deadline of ``execute_shell`` / ``execute_python``.
        max_timeout_s: the largest deadline a caller may ask for.
    """

    max_read_bytes: int = 2 * 1024 * 1024
    max_output_chars: int = 100_000
    max_results: int = 500
    max_grep_file_bytes: int = 5 * 1024 * 1024
    max_line_bytes: int = 64 * 1024
    worker_threads: int = 8
    default_timeout_s: float = 60.0
    max_timeout_s: float = 600.0


@dataclass(slots=True)
class WorkspaceContext:
    """The state behind one workspace server.

    Attributes:
        confinement: the root and the path checks.
        scratch: the session's scratch directory (absolute), or ``None`` without a session id.
        sandbox: wraps commands when the sandbox is on; ``None`` runs them unsandboxed.
        limits: the caps.
    """

    confinement: Confinement
    scratch: Path | None = None
    sandbox: SandboxHook | None = None
    limits: WorkspaceLimits = field(default_factory=WorkspaceLimits)
    _limiter: anyio.CapacityLimiter | None = None

    @property
    def root(self) -> Path:
        """The real path of the workspace root."""
        return self.confinement.root

    @property
    def default_cwd(self) -> Path:
        """Where commands run unless told otherwise: the scratch dir if any, else the root."""
        return self.scratch if self.scratch is not None else self.root

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run the blocking ``fn(*args)`` in a worker thread of this workspace's own pool.

        Cancelling the call (a client's cancellation or timeout) waits for ``fn``, which stops at
        its next :func:`check_cancelled`.
        """
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.limits.worker_threads)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=self._limiter)


def check_cancelled() -> None:
    """In a worker thread started by :meth:`WorkspaceContext.run`: stop if the call was cancelled."""
    try:
        anyio.from_thread.check_cancelled()
    except RuntimeError:
        return  # not in an anyio worker thread (a direct call in a unit test): nothing to stop


def open_regular(parent: int, name: str, flags: int, shown: str, mode: int = 0o666) -> int:
    """Open ``name`` in the directory ``parent`` without following a symlink or blocking, and
    refuse anything but a regular file (FIFOs, devices and sockets could hang or flood a tool).

    Raises:
        OSError: ``ELOOP`` for a symlink (the confinement follows it), or any other open error.
        ToolError: it is a directory or not a regular file.
    """
    fd = os.open(name, flags | _OPEN_FLAGS, mode, dir_fd=parent)
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), shown)
        if not stat.S_ISREG(kind):
            raise ToolError(f"{shown!r} is not a regular file (a FIFO, socket or device); only files can be used")
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def os_errors(action: str, shown: str) -> Iterator[None]:
    """Turn an :class:`OSError` into a :class:`ToolError` naming the action and the path."""
    try:
        yield
    except FileNotFoundError as exc:
        raise ToolError(f"cannot {action} {shown!r}: no such file or directory") from exc
    except IsADirectoryError as exc:
        raise ToolError(f"cannot {action} {shown!r}: it is a directory") from exc
    except NotADirectoryError as exc:
        raise ToolError(f"cannot {action} {shown!r}: a parent is not a directory") from exc
    except PermissionError as exc:
        raise ToolError(f"cannot {action} {shown!r}: permission denied") from exc
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise ToolError(f"cannot {action} {shown!r}: {reason}") from exc
