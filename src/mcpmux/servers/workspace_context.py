"""What every workspace tool shares: the confinement, the limits, the scratch dir, the sandbox hook."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.servers.confinement import Confinement

__all__ = ["SandboxHook", "WorkspaceContext", "WorkspaceLimits", "os_errors"]

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
        default_timeout_s: default deadline of ``execute_shell`` / ``execute_python``.
        max_timeout_s: the largest deadline a caller may ask for.
    """

    max_read_bytes: int = 2 * 1024 * 1024
    max_output_chars: int = 100_000
    max_results: int = 500
    max_grep_file_bytes: int = 5 * 1024 * 1024
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

    @property
    def root(self) -> Path:
        """The real path of the workspace root."""
        return self.confinement.root

    @property
    def default_cwd(self) -> Path:
        """Where commands run unless told otherwise: the scratch dir if any, else the root."""
        return self.scratch if self.scratch is not None else self.root


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
