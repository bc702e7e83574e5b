"""Confinement of file paths to a root directory, as the built-in servers see it.

Every path a tool receives goes through :meth:`Confinement.resolve` before it is touched. A path is
relative to the root (or absolute); it is normalised and its symlinks are followed, and the result
must lie inside the real root. ``..`` that stays inside the root is fine; anything that leaves it
(``../x``, ``/etc/passwd``, a symlink pointing outside) is refused with :class:`PathOutsideRoot`.

The check runs on the resolved path just before use; a process that swaps a directory for a
symlink between the check and the use (a race) is out of scope here: that is the sandbox's job.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["Confinement", "PathOutsideRoot", "scratch_dir_name"]

SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
SCRATCH_PARENT = Path(".mcpmux") / "scratch"


class PathOutsideRoot(ToolError):
    """A tool was given a path that resolves outside the workspace root."""

    def __init__(self, given: str, resolved: Path, root: Path) -> None:
        super().__init__(
            f"path {given!r} is outside the workspace root {root} (it resolves to {resolved}); "
            "use a path relative to the root, without '..' or symlinks that leave it"
        )
        self.given, self.resolved, self.root = given, resolved, root


def scratch_dir_name(session_id: str) -> Path:
    """The scratch directory of ``session_id``, relative to the root.

    Raises:
        ConfigError: the session id has characters other than letters, digits, ``_ . -``.
    """
    if not re.fullmatch(SESSION_ID_PATTERN, session_id):
        raise ConfigError(
            ConfigProblem("<builtin>", "session_id", f"session id {session_id!r} must match {SESSION_ID_PATTERN}")
        )
    return SCRATCH_PARENT / session_id


class Confinement:
    """Resolves tool paths against a root and refuses those that leave it.

    Args:
        root: the directory to confine to; it must exist.

    Raises:
        ConfigError: ``root`` does not exist or is not a directory.
    """

    def __init__(self, root: Path) -> None:
        real = Path(os.path.realpath(root.expanduser()))
        if not real.is_dir():
            raise ConfigError(ConfigProblem("<builtin>", "root", f"workspace root {str(root)!r} is not a directory"))
        self.root = real

    def resolve(self, path: str, *, follow_final: bool = True) -> Path:
        """The real path of ``path`` (relative to the root, or absolute) inside the root.

        Args:
            path: what the tool was given; empty means the root itself.
            follow_final: follow a symlink in the last component (``False`` for delete and move,
                which act on the link itself).

        Raises:
            PathOutsideRoot: the path, with symlinks followed, is not inside the root.
        """
        if "\x00" in path:
            raise ToolError(f"path {path!r} contains a NUL character")
        candidate = Path(path).expanduser() if path.startswith("~") else Path(path)
        joined = candidate if candidate.is_absolute() else self.root / candidate
        if follow_final:
            resolved = Path(os.path.realpath(joined))
        else:
            normal = Path(os.path.normpath(joined))
            resolved = Path(os.path.realpath(normal.parent)) / normal.name
        if not self.contains(resolved):
            raise PathOutsideRoot(path, resolved, self.root)
        return resolved

    def contains(self, resolved: Path) -> bool:
        """Whether an already resolved path is the root or below it."""
        return resolved == self.root or resolved.is_relative_to(self.root)

    def relative(self, resolved: Path) -> str:
        """``resolved`` as the tools show it: relative to the root, ``.`` for the root."""
        return "." if resolved == self.root else str(resolved.relative_to(self.root))
