"""The workspace's search tools: ``glob`` (find files by name) and ``grep`` (find lines by regex)."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpmux.servers._sdk import tool
from mcpmux.servers.workspace_context import WorkspaceContext, os_errors
from mcpmux.servers.workspace_files import READ_ONLY

__all__ = ["register_search_tools"]

# Directories no one greps on purpose; they dwarf the sources they sit beside.
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"})


def _walk_files(ws: WorkspaceContext, start: Path, include: str | None) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for folder, dirs, files in os.walk(start, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            if include and not fnmatch.fnmatch(name, include):
                continue
            path = Path(folder, name)
            # A symlinked file may point outside the root: check where it really is.
            if path.is_symlink() and not ws.confinement.contains(Path(os.path.realpath(path))):
                continue
            yield path


def _compile(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc


def _grep_file(path: Path, regex: re.Pattern[str], context: int, max_bytes: int) -> list[tuple[int, str, bool]] | None:
    """``(line number, line, is_match)`` for the matches and their context; ``None`` if unreadable."""
    try:
        if path.stat().st_size > max_bytes:
            return []
        data = path.read_bytes()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    hits = [i for i, line in enumerate(lines) if regex.search(line)]
    if not hits:
        return []
    wanted: dict[int, bool] = {}
    for i in hits:
        for j in range(max(0, i - context), min(len(lines), i + context + 1)):
            wanted[j] = wanted.get(j, False) or j == i
    return [(j + 1, lines[j], wanted[j]) for j in sorted(wanted)]


def register_search_tools(server: MCPServer, ws: WorkspaceContext) -> None:
    """Add ``glob`` and ``grep``."""
    limits = ws.limits

    @tool(server, READ_ONLY)
    def glob(
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
        base = ws.confinement.resolve(path)
        parts = Path(pattern).parts
        if not parts:
            raise ToolError(f"pattern {pattern!r} matches nothing; use e.g. `*` or `**/*.py`")
        if any("**" in part and part != "**" for part in parts):
            raise ToolError(f"invalid pattern {pattern!r}: `**` must be a whole path segment, as in `**/*.py`")
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise ToolError(f"pattern {pattern!r} must be relative to `path` and must not contain '..'")
        found: list[str] = []
        with os_errors("search", path):
            for match in base.glob(pattern):
                if any(part in SKIPPED_DIRS for part in match.relative_to(base).parts[:-1]):
                    continue
                real = Path(os.path.realpath(match))
                if not ws.confinement.contains(real):
                    continue
                shown = ws.confinement.relative(Path(os.path.normpath(match)))
                found.append(shown + "/" if match.is_dir() else shown)
                if len(found) > limits.max_results:
                    break
        if not found:
            return f"no paths match {pattern!r} under {ws.confinement.relative(base)}"
        more = len(found) > limits.max_results
        lines = sorted(found[: limits.max_results])
        if more:
            lines.append(f"[cut at {limits.max_results} results; narrow the pattern]")
        return "\n".join(lines)

    @tool(server, READ_ONLY)
    def grep(
        pattern: Annotated[str, Field(description="Python regular expression searched in each line.")],
        path: Annotated[str, Field(description="File or directory to search, relative to the root.")] = ".",
        include: Annotated[
            str | None, Field(description="Only files whose name matches this glob, e.g. `*.py`.")
        ] = None,
        context_lines: Annotated[int, Field(ge=0, le=20, description="Lines of context around each match.")] = 0,
        ignore_case: Annotated[bool, Field(description="Match case-insensitively.")] = False,
        max_matches: Annotated[int, Field(ge=1, le=2000, description="Stop after this many matching lines.")] = 200,
    ) -> str:
        """Search text files in the workspace for lines matching a regular expression.

        Output: `path:line:text` for a matching line and `path-line-text` for a context line,
        groups separated by `--`. Binary files, files above 5 MB and the directories `.git`,
        `node_modules`, `.venv`, `__pycache__` are skipped. Stops after `max_matches` matching
        lines and says so.
        """
        start = ws.confinement.resolve(path)
        if not start.exists():
            raise ToolError(f"cannot search {path!r}: no such file or directory")
        regex = _compile(pattern, ignore_case)
        out: list[str] = []
        matches = used = 0
        unreadable: list[str] = []
        for file in _walk_files(ws, start, include):
            rows = _grep_file(file, regex, context_lines, limits.max_grep_file_bytes)
            if rows is None:
                unreadable.append(ws.confinement.relative(file))
                continue
            shown = ws.confinement.relative(file)
            previous = None
            for number, line, is_match in rows:
                if previous is not None and number != previous + 1:
                    out.append("--")
                row = f"{shown}{':' if is_match else '-'}{number}{':' if is_match else '-'}{line}"
                out.append(row)
                used += len(row) + 1
                previous, matches = number, matches + is_match
                if matches >= max_matches or used > limits.max_output_chars:
                    out.append(f"[stopped after {matches} matching lines; narrow the pattern or the path]")
                    return "\n".join(out)
            if rows and context_lines:
                out.append("--")
        if out and out[-1] == "--":
            out.pop()
        if not out:
            out.append(f"no lines match {pattern!r} under {ws.confinement.relative(start)}")
        if unreadable:
            out.append(f"[could not read {len(unreadable)} files: {', '.join(unreadable[:10])}]")
        return "\n".join(out)
