"""The workspace's file tools: read, write, edit, list, move, delete (all confined to the root)."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcpmux.servers._sdk import tool
from mcpmux.servers.workspace_context import WorkspaceContext, os_errors

__all__ = ["register_file_tools"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
DESTROYS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

PathArg = Annotated[str, Field(description="Path relative to the workspace root (absolute paths must lie inside it).")]


def _read_text(path: Path, shown: str, max_bytes: int) -> str:
    with os_errors("read", shown):
        size = path.stat().st_size
        if size > max_bytes:
            raise ToolError(f"{shown!r} has {size} bytes, above the {max_bytes}-byte limit for editing")
        data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolError(f"{shown!r} looks like a binary file ({len(data)} bytes); only text files can be read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Rewriting a file decoded with replacement characters would corrupt its other bytes.
        raise ToolError(f"{shown!r} is not valid UTF-8 (byte {exc.start}); it cannot be edited safely") from exc


def _match_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (found := text.find(needle, start)) != -1:
        lines.append(text.count("\n", 0, found) + 1)
        start = found + 1
    return lines


def register_file_tools(server: MCPServer, ws: WorkspaceContext) -> None:
    """Add ``read_file``, ``write_file``, ``edit_file``, ``list_directory``, ``move``, ``delete``."""
    cap = ws.limits.max_output_chars

    @tool(server, READ_ONLY)
    def read_file(
        path: PathArg,
        start_line: Annotated[int, Field(ge=1, description="First line to return (1-based).")] = 1,
        max_lines: Annotated[
            int | None, Field(ge=1, description="How many lines to return; omit for the rest of the file.")
        ] = None,
    ) -> str:
        """Read a UTF-8 text file in the workspace and return its text (optionally a range of lines).

        Large files: pass `start_line` and `max_lines` to page through them. The result is cut at
        about 100,000 characters; a final line in square brackets then says which lines were shown
        and how to continue. Binary files are refused.
        """
        target = ws.confinement.resolve(path)
        with os_errors("read", path):
            size = target.stat().st_size
        if size > ws.limits.max_read_bytes and max_lines is None:
            raise ToolError(
                f"{path!r} has {size} bytes, above the {ws.limits.max_read_bytes}-byte limit for a whole read; "
                "pass start_line and max_lines to read part of it"
            )
        with os_errors("read", path), target.open("r", encoding="utf-8", errors="replace", newline="") as handle:
            stop = None if max_lines is None else start_line - 1 + max_lines
            chosen: list[str] = []
            used, last, cut = 0, start_line - 1, False
            for line in itertools.islice(handle, start_line - 1, stop):
                if "\x00" in line:
                    raise ToolError(f"{path!r} looks like a binary file; only text files can be read")
                if used + len(line) > cap and chosen:
                    cut = True
                    break
                chosen.append(line[:cap])
                used, last = used + len(line), last + 1
            more = cut or handle.readline() != ""
        text = "".join(chosen)
        if more:
            text += f"\n[shown lines {start_line}-{last}; more follow: call again with start_line={last + 1}]"
        elif not chosen and start_line > 1:
            text = f"[{path!r} has fewer than {start_line} lines]"
        return text

    @tool(server, WRITES)
    def write_file(
        path: PathArg,
        content: Annotated[str, Field(description="The complete new text of the file (UTF-8).")],
    ) -> str:
        """Create a text file in the workspace, or replace the whole content of an existing one.

        Missing parent directories are created. To change part of a file, prefer `edit_file`.
        """
        target = ws.confinement.resolve(path)
        existed = target.exists()
        with os_errors("write", path):
            target.parent.mkdir(parents=True, exist_ok=True)
            data = content.encode("utf-8", errors="replace")
            target.write_bytes(data)
        return f"{'overwrote' if existed else 'created'} {ws.confinement.relative(target)} ({len(data)} bytes)"

    @tool(server, WRITES)
    def edit_file(
        path: PathArg,
        old_text: Annotated[
            str, Field(min_length=1, description="Exact text to replace, including whitespace; must occur once.")
        ],
        new_text: Annotated[str, Field(description="The replacement text.")],
    ) -> str:
        """Replace one exact occurrence of `old_text` with `new_text` in a workspace text file.

        The match is literal (no regex) and must be unique: if `old_text` occurs zero or several
        times, nothing is changed and the error says where it occurs; add surrounding lines to
        make it unique.
        """
        target = ws.confinement.resolve(path)
        text = _read_text(target, path, ws.limits.max_read_bytes)
        where = _match_lines(text, old_text)
        if not where:
            raise ToolError(f"old_text was not found in {path!r}; nothing changed (read the file to copy it exactly)")
        if len(where) > 1:
            shown = ", ".join(map(str, where[:20]))
            raise ToolError(
                f"old_text occurs {len(where)} times in {path!r} (lines {shown}); nothing changed: "
                "include more surrounding text so that it matches exactly once"
            )
        with os_errors("write", path):
            target.write_text(text.replace(old_text, new_text, 1), encoding="utf-8", newline="")
        return f"edited {ws.confinement.relative(target)}: replaced 1 occurrence at line {where[0]}"

    @tool(server, READ_ONLY)
    def list_directory(
        path: Annotated[str, Field(description="Directory relative to the workspace root.")] = ".",
        show_hidden: Annotated[bool, Field(description="Include names starting with '.'.")] = False,
    ) -> str:
        """List one directory of the workspace: one entry per line, directories end with '/'.

        Each line is `name/` for a directory, `name  (N bytes)` for a file and `name -> target`
        for a symlink. Use `glob` to find files recursively.
        """
        target = ws.confinement.resolve(path)
        if target.is_file():
            raise ToolError(f"{path!r} is a file, not a directory; use read_file to read it")
        with os_errors("list", path):
            entries = sorted(os.scandir(target), key=lambda e: e.name)
        lines: list[str] = []
        for entry in entries:
            if entry.name.startswith(".") and not show_hidden:
                continue
            if len(lines) >= ws.limits.max_results:
                lines.append(f"[listing cut at {ws.limits.max_results} entries]")
                break
            lines.append(_describe_entry(entry))
        header = f"{ws.confinement.relative(target)}/ ({len(lines)} entries)"
        return "\n".join([header, *lines]) if lines else f"{header}: empty"

    @tool(server, DESTROYS)
    def move(
        source: Annotated[str, Field(description="File or directory to move, relative to the root.")],
        destination: Annotated[str, Field(description="New path, relative to the root.")],
        overwrite: Annotated[bool, Field(description="Replace an existing destination file.")] = False,
    ) -> str:
        """Move or rename a file or directory inside the workspace.

        Refused if the destination exists, unless `overwrite` is true (files only).
        """
        src = ws.confinement.resolve(source, follow_final=False)
        dst = ws.confinement.resolve(destination, follow_final=False)
        if src == ws.root:
            raise ToolError("the workspace root itself cannot be moved")
        if not src.exists() and not src.is_symlink():
            raise ToolError(f"cannot move {source!r}: no such file or directory")
        if dst.exists() and (not overwrite or dst.is_dir()):
            raise ToolError(f"cannot move to {destination!r}: it exists (pass overwrite=true to replace a file)")
        if dst.is_relative_to(src):
            raise ToolError(f"cannot move {source!r} into itself ({destination!r})")
        with os_errors("move", source):
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(src, dst)
        return f"moved {ws.confinement.relative(src)} -> {ws.confinement.relative(dst)}"

    @tool(server, DESTROYS)
    def delete(
        path: PathArg,
        recursive: Annotated[bool, Field(description="Required to delete a directory and all its contents.")] = False,
    ) -> str:
        """Delete a file, a symlink (not its target) or, with `recursive=true`, a directory tree."""
        target = ws.confinement.resolve(path, follow_final=False)
        if target == ws.root:
            raise ToolError("the workspace root itself cannot be deleted")
        with os_errors("delete", path):
            if target.is_dir() and not target.is_symlink():
                if not recursive:
                    raise ToolError(f"{path!r} is a directory; pass recursive=true to delete it and its contents")
                shutil.rmtree(target)
            else:
                target.unlink()
        return f"deleted {ws.confinement.relative(target)}"


def _describe_entry(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return f"{entry.name} -> {os.readlink(entry.path)}"
    if entry.is_dir():
        return f"{entry.name}/"
    return f"{entry.name}  ({entry.stat().st_size} bytes)"
