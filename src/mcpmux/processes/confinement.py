"""Confinement of file paths to a root directory, as the built-in servers see it.

A path a tool receives is relative to the root (or absolute inside it). It is never checked and
then reused as a string: :meth:`Confinement.at` walks it from a file descriptor of the root, one
component at a time, opening each directory with ``O_NOFOLLOW`` relative to the previous one, and
hands the tool the descriptor of the final parent plus the final name, which the tool opens with
``O_NOFOLLOW`` (``openat``/``unlinkat``/``renameat``). ``..`` pops the walk's own stack of
descriptors (the file system's ``..`` is never opened), and a symlink is followed by reading it
and walking its target the same way: a target, or a ``..``, that leaves the root is refused with
:class:`PathOutsideRoot`. A process that swaps a directory for a symlink to ``/`` between two
calls, or during one, therefore never gets a tool to open anything outside the root.

Inherent limits, documented rather than solved: a hard link inside the root to a file outside is
that file (Linux forbids hard links to files one cannot write, with ``fs.protected_hardlinks``);
a directory that a concurrent process *renames* out of the root while a walk holds it is followed
there. A bind mount inside the root is part of the root. The sandbox is what confines the
workspace's own commands (``execute_shell``), which can write such links.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["Confinement", "PathOutsideRoot", "open_dir_at", "scratch_dir_name", "too_wide_root"]

SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
SCRATCH_PARENT = Path(".mcpmux") / "scratch"
MAX_SYMLINKS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Directories whose whole tree no workspace should cover by accident (the user's home is added at run time).
WIDE_ROOTS = ("/", "/home", "/Users", "/root", "/etc", "/usr", "/var", "/opt", "/srv", "/tmp", "/mnt", "/media")

T = TypeVar("T")


class PathOutsideRoot(ToolError):
    """A tool was given a path that resolves outside the workspace root."""

    def __init__(self, given: str, resolved: Path | str, root: Path) -> None:
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


def too_wide_root(root: Path) -> str | None:
    """Why ``root`` (a real path) is too wide to serve by default, or ``None``.

    ``/``, the user's home itself, its parents and the top-level system directories put secrets
    such as ``~/.ssh`` in reach of tools that need no approval to read.
    """
    home = Path(os.path.realpath(Path.home()))
    if root == home:
        return f"it is your home directory ({home}), which holds keys and credentials (~/.ssh, ~/.aws, ...)"
    if home.is_relative_to(root):
        return f"it contains your home directory ({home})"
    if str(root) in WIDE_ROOTS:
        return f"{root} is a system-wide directory"
    return None


def open_dir_at(parent: int, name: str, create: bool = False) -> int:
    """Open the directory ``name`` in ``parent`` without following a symlink (``ELOOP`` for one,
    which :meth:`Confinement.at` then follows); ``create`` makes it when missing.
    """
    try:
        return Confinement._open_dir(parent, name, create)
    except NotADirectoryError as exc:
        if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "a symbolic link", name) from exc
        raise


class Confinement:
    """Opens tool paths beneath a root and refuses those that leave it.

    Args:
        root: the directory to confine to; it must exist.

    Raises:
        ConfigError: ``root`` does not exist or is not a directory.
    """

    def __init__(self, root: Path) -> None:
        real = Path(os.path.realpath(root.expanduser()))
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            problem = f"workspace root {str(root)!r} is not a directory ({exc.strerror})"
            raise ConfigError(ConfigProblem("<builtin>", "root", problem)) from exc
        self.root = real
        self._root_fd = fd
        weakref.finalize(self, os.close, fd)

    def at(self, path: str, op: Callable[[int, str], T], *, follow: bool = True, create_parents: bool = False) -> T:
        """Run ``op(parent_fd, name)`` on the final component of ``path``, walked beneath the root.

        ``op`` must act on ``name`` relative to ``parent_fd`` without following a symlink there
        (``O_NOFOLLOW``, ``follow_symlinks=False``); when it fails with ``ELOOP`` and ``follow`` is
        set, the link is read and its target walked in turn. The root itself is ``(root_fd, ".")``.
        The descriptor is valid only during the call.

        Raises:
            PathOutsideRoot: the path, or a symlink on it, leaves the root.
            ToolError: a component is missing or not a directory, or too many symlinks.
        """
        if "\x00" in path:
            raise ToolError(f"path {path!r} contains a NUL character")
        stack = [os.dup(self._root_fd)]
        try:
            pending = self._parts(path, path)
            links = 0
            while True:
                name = self._descend(path, pending, stack, create_parents)
                try:
                    return op(stack[-1], name)
                except OSError as exc:
                    if not (follow and exc.errno == errno.ELOOP and name != "."):
                        raise
                    target = self._readlink(stack[-1], name)
                    if target is None:
                        raise
                links += 1
                if links > MAX_SYMLINKS:
                    raise ToolError(f"path {path!r}: too many levels of symbolic links") from None
                pending = self._splice(path, target, stack)
        finally:
            for fd in stack:
                os.close(fd)

    def display(self, path: str) -> str:
        """``path`` as the tools show it, normalised relative to the root (``.`` for the root).

        For messages only: it is never used to reach a file.
        """
        parts: list[str] = []
        for part in self._parts(path, path):
            if part == "..":
                if parts:
                    parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        return "/".join(parts) or "."

    def _parts(self, given: str, path: str) -> list[str]:
        candidate = os.path.expanduser(path) if path.startswith("~") else path
        if os.path.isabs(candidate):
            normal = os.path.normpath(candidate)
            root = str(self.root)
            if normal != root and not normal.startswith(root.rstrip("/") + "/"):
                raise PathOutsideRoot(given, normal, self.root)
            candidate = normal[len(root) :].lstrip("/")
        return [part for part in candidate.split("/") if part not in ("", ".")]

    def _descend(self, given: str, pending: list[str], stack: list[int], create: bool) -> str:
        """Walk every component of ``pending`` but the last (consumed); return the final name."""
        links = 0
        while pending:
            part = pending.pop(0)
            if part == "..":
                if len(stack) == 1:
                    raise PathOutsideRoot(given, "a parent of the root", self.root)
                os.close(stack.pop())
                continue
            if not pending:
                return part
            try:
                fd = self._open_dir(stack[-1], part, create)
            except OSError as exc:
                target = self._readlink(stack[-1], part) if exc.errno in (errno.ELOOP, errno.ENOTDIR) else None
                if target is None:
                    raise
                links += 1
                if links > MAX_SYMLINKS:
                    raise ToolError(f"path {given!r}: too many levels of symbolic links") from None
                pending[:0] = self._splice(given, target, stack)
                continue
            stack.append(fd)
        return "."

    @staticmethod
    def _open_dir(parent: int, name: str, create: bool) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
        # Created meanwhile by someone else: open whatever is there, still without following it.
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=parent)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)

    @staticmethod
    def _readlink(parent: int, name: str) -> str | None:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            return os.readlink(name, dir_fd=parent) if stat.S_ISLNK(st.st_mode) else None
        except OSError:
            return None

    def _splice(self, given: str, target: str, stack: list[int]) -> list[str]:
        """The components to walk for a symlink's ``target``; an absolute one restarts at the root."""
        if os.path.isabs(target):
            parts = self._parts(given, target)
            while len(stack) > 1:
                os.close(stack.pop())
            return parts
        return [part for part in target.split("/") if part not in ("", ".")]

    def open_dir(self, path: str, *, create: bool = False) -> int:
        """A new descriptor of the directory ``path`` (the caller closes it); ``create`` makes it
        and its missing parents first.

        Raises:
            NotADirectoryError: it is not a directory.
            FileNotFoundError: it does not exist (and ``create`` is not set).
        """
        return self.at(path, lambda fd, name: open_dir_at(fd, name, create), create_parents=create)

    def resolve(self, path: str, *, create: bool = False) -> Path:
        """The real path of the directory ``path``, read from its descriptor (for a command's cwd).

        Raises:
            PathOutsideRoot: the path leaves the root.
            ToolError: it is not a directory.
        """
        try:
            fd = self.open_dir(path, create=create)
        except (NotADirectoryError, FileNotFoundError) as exc:
            raise ToolError(f"{path!r} is not a directory") from exc
        try:
            real = Path(os.readlink(f"/proc/self/fd/{fd}")) if os.path.isdir("/proc/self/fd") else self._real(path)
        finally:
            os.close(fd)
        if real != self.root and not real.is_relative_to(self.root):
            raise PathOutsideRoot(path, real, self.root)
        return real

    def _real(self, path: str) -> Path:
        return Path(os.path.realpath(self.root / self.display(path)))

    def relative(self, resolved: Path) -> str:
        """A real path below the root as the tools show it: relative to the root, ``.`` for the root."""
        return "." if resolved == self.root else str(resolved.relative_to(self.root))

    def contains(self, resolved: Path) -> bool:
        """Whether an already resolved path is the root or below it."""
        return resolved == self.root or resolved.is_relative_to(self.root)
