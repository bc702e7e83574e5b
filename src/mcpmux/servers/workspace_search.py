"""The workspace's search tools: ``glob`` (find files by name) and ``grep`` (find lines by regex).

Both walk the tree with ``os.fwalk`` from a descriptor of the start directory (never descending
into a symlink) and open files with ``O_NOFOLLOW`` relative to their directory's descriptor, so a
directory swapped for a symlink mid-walk leads nowhere outside the root. Patterns run on RE2 in
linear time (:mod:`mcpmux.servers._regex`), in the workspace's worker threads, and both stop at
the call's cancellation.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpmux.processes.confinement import PathOutsideRoot
from mcpmux.servers._regex import Matcher, compile_linear
from mcpmux.servers._sdk import tool
from mcpmux.servers.workspace_context import WorkspaceContext, check_cancelled, open_regular, os_errors
from mcpmux.servers.workspace_files import READ_ONLY

__all__ = ["glob_regex", "register_search_tools"]

# Directories no one greps on purpose; they dwarf the sources they sit beside.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
Row = tuple[int, str, bool]


def glob_regex(pattern: str) -> str:
    """An RE2 regex for a glob over ``/``-separated relative paths (``*``, ``?``, ``[..]``, ``**``)."""
    parts = pattern.split("/")
    out = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
            continue
        out.append(_segment_regex(part) + ("" if last else "/"))
    return "".join(out)


def _segment_regex(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        char = part[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := part.find("]", i + 2)) != -1:
            body = part[i + 1 : close]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = close
        else:
            out.append("\\" + char if not char.isalnum() and char != "_" else char)
        i += 1
    return "".join(out)


def _walk(start_fd: int, max_depth: int | None) -> Iterator[tuple[str, list[str], list[str], int]]:
    """``os.fwalk`` below ``start_fd`` (symlinks listed, never entered), pruning skipped directories."""
    for folder, dirs, files, fd in os.fwalk(".", dir_fd=start_fd, follow_symlinks=False):
        check_cancelled()
        relative = "" if folder == "." else folder[2:] + "/"
        depth = relative.count("/")
        yield relative, dirs, files, fd
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and (max_depth is None or depth + 1 < max_depth))


def _grep_bytes(data: bytes, regex: Matcher, context: int) -> list[Row]:
    """``(line number, line, is_match)`` for the matches and their context."""
    if b"\x00" in data[:8192]:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    hits = []
    for i, line in enumerate(lines):
        if i % 4096 == 0:
            check_cancelled()
        if regex.search(line):
            hits.append(i)
    if not hits:
        return []
    wanted: dict[int, bool] = {}
    for i in hits:
        for j in range(max(0, i - context), min(len(lines), i + context + 1)):
            wanted[j] = wanted.get(j, False) or j == i
    return [(j + 1, lines[j], wanted[j]) for j in sorted(wanted)]


def _read_small(parent: int, name: str, shown: str, max_bytes: int) -> bytes | None:
    """The file's bytes, ``b""`` when above ``max_bytes``; ``None`` when it is not a regular file."""
    try:
        fd = open_regular(parent, name, os.O_RDONLY, shown)
    except ToolError:
        return None
    try:
        if os.fstat(fd).st_size > max_bytes:
            return b""
        return os.read(fd, max_bytes)
    finally:
        os.close(fd)


def register_search_tools(server: MCPServer, ws: WorkspaceContext) -> None:
    """Add ``glob`` and ``grep``."""

    @tool(server, READ_ONLY)
    async def glob(
        pattern: Annotated[
            str, Field(description="Glob pattern relative to `path`, e.g. `**/*.py` (recursive) or `*.md`.")
        ],
        path: Annotated[str, Field(description="Directory to search from, relative to the root.")] = ".",
    ) -> str:
        """Find files and directories in the workspace whose path matches a glob pattern.

        `*` matches within one path segment, `**` matches any number of directories, `?` one
        character, `[abc]` a set. Returns matching paths relative to the workspace root, one per
        line, sorted; directories end with '/'. At most 500 results.
        """
        return await ws.run(_glob, ws, pattern, path)

    @tool(server, READ_ONLY)
    async def grep(
        pattern: Annotated[
            str, Field(description="Regular expression (RE2: no backreferences or lookaround) searched in each line.")
        ],
        path: Annotated[str, Field(description="File or directory to search, relative to the root.")] = ".",
        include: Annotated[
            str | None, Field(description="Only files whose name matches this glob, e.g. `*.py`.")
        ] = None,
        context_lines: Annotated[int, Field(ge=0, le=20, description="Lines of context around each match.")] = 0,
        ignore_case: Annotated[bool, Field(description="Match case-insensitively.")] = False,
        max_matches: Annotated[int, Field(ge=1, le=2000, description="Stop after this many matching lines.")] = 200,
    ) -> str:
        """Search text files in the workspace for lines matching a regular expression.

        The pattern is RE2 syntax (like Python's `re` without backreferences and lookaround; it
        runs in linear time). Output: `path:line:text` for a matching line and `path-line-text`
        for a context line, groups separated by `--`. Binary files, files above 5 MB and the
        directories `.git`, `node_modules`, `.venv`, `__pycache__` are skipped. Stops after
        `max_matches` matching lines and says so.
        """
        regex = compile_linear(pattern, ignore_case=ignore_case)
        names = compile_linear(_segment_regex(include), what="include glob") if include else None
        return await ws.run(_grep, ws, pattern, regex, path, names, context_lines, max_matches)


def _glob(ws: WorkspaceContext, pattern: str, path: str) -> str:
    parts = pattern.split("/")
    if not pattern or pattern.startswith("/") or ".." in parts:
        raise ToolError(f"pattern {pattern!r} must be relative to `path` and must not contain '..'")
    if any("**" in part and part != "**" for part in parts):
        raise ToolError(f"invalid pattern {pattern!r}: `**` must be a whole path segment, as in `**/*.py`")
    parts = [part for part in parts if part not in ("", ".")]
    if not parts:
        raise ToolError(f"pattern {pattern!r} matches nothing; use e.g. `*` or `**/*.py`")
    matcher = compile_linear(glob_regex("/".join(parts)), what="glob pattern")
    fullmatch = getattr(matcher, "fullmatch")  # noqa: B009 - the Matcher protocol names only search
    base = ws.confinement.display(path)
    prefix = "" if base == "." else base + "/"
    depth = None if "**" in parts else len(parts)
    found: list[str] = []
    with os_errors("search", path):
        start = ws.confinement.open_dir(path)
        try:
            for folder, dirs, files, _ in _walk(start, depth):
                for name in [*dirs, *files]:
                    relative = folder + name
                    if fullmatch(relative):
                        found.append(prefix + relative + ("/" if name in dirs else ""))
                if len(found) > ws.limits.max_results:
                    break
        finally:
            os.close(start)
    if not found:
        return f"no paths match {pattern!r} under {base}"
    lines = sorted(found)[: ws.limits.max_results]
    if len(found) > ws.limits.max_results:
        lines.append(f"[cut at {ws.limits.max_results} results; narrow the pattern]")
    return "\n".join(lines)


def _grep(
    ws: WorkspaceContext,
    pattern: str,
    regex: Matcher,
    path: str,
    names: Matcher | None,
    context: int,
    max_matches: int,
) -> str:
    out: list[str] = []
    matches = used = 0
    unreadable: list[str] = []
    with os_errors("search", path):
        for shown, data in _files(ws, path, names):
            if data is None:
                unreadable.append(shown)
                continue
            rows = _grep_bytes(data, regex, context)
            previous = None
            for number, line, is_match in rows:
                if previous is not None and number != previous + 1:
                    out.append("--")
                mark = ":" if is_match else "-"
                row = f"{shown}{mark}{number}{mark}{line}"
                out.append(row)
                used += len(row) + 1
                previous, matches = number, matches + is_match
                if matches >= max_matches or used > ws.limits.max_output_chars:
                    out.append(f"[stopped after {matches} matching lines; narrow the pattern or the path]")
                    return "\n".join(out)
            if rows and context:
                out.append("--")
    if out and out[-1] == "--":
        out.pop()
    if not out:
        out.append(f"no lines match {pattern!r} under {ws.confinement.display(path)}")
    if unreadable:
        out.append(f"[could not read {len(unreadable)} files: {', '.join(unreadable[:10])}]")
    return "\n".join(out)


def _files(ws: WorkspaceContext, path: str, names: Matcher | None) -> Iterator[tuple[str, bytes | None]]:
    """``(shown path, bytes or None if unreadable)`` of every file to grep under ``path``."""
    cap = ws.limits.max_grep_file_bytes
    base = ws.confinement.display(path)
    try:
        start = ws.confinement.open_dir(path)
    except NotADirectoryError:
        yield base, ws.confinement.at(path, lambda parent, name: _read_small(parent, name, base, cap))
        return
    prefix = "" if base == "." else base + "/"
    try:
        for folder, _, files, fd in _walk(start, None):
            for name in sorted(files):
                if names is not None and not names.search(name):
                    continue
                shown = prefix + folder + name
                yield shown, _read_linked(ws, fd, name, shown, cap)
    finally:
        os.close(start)


def _read_linked(ws: WorkspaceContext, parent: int, name: str, shown: str, cap: int) -> bytes | None:
    """A file's bytes; a symlink is followed only through the confinement (skipped if it leaves)."""
    try:
        return _read_small(parent, name, shown, cap)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return None
    try:
        return ws.confinement.at(shown, lambda p, n: _read_small(p, n, shown, cap))
    except PathOutsideRoot:
        return b""  # a link out of the root: not part of the workspace
    except (OSError, ToolError):
        return None
