"""The workspace's file tools: read, write, edit, list, move, delete (all confined to the root).

Every path is reached through :meth:`Confinement.at <mcpmux.processes.confinement.Confinement.at>`:
the tools act on ``(directory descriptor, name)`` pairs with ``O_NOFOLLOW``, never on a path string
that was checked earlier. They run in the workspace's own worker threads and refuse anything but
regular files, so a FIFO or a device cannot hold a thread, and read in bounded memory.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcpmux.processes.confinement import open_dir_at
from mcpmux.servers._sdk import tool
from mcpmux.servers.workspace_context import WorkspaceContext, open_regular, os_errors
from mcpmux.servers.workspace_read import read_lines

__all__ = ["register_file_tools"]

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
DESTROYS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

PathArg = Annotated[str, Field(description="Path relative to the workspace root (absolute paths must lie inside it).")]


def _read_all(fd: int, shown: str, max_bytes: int) -> bytes:
    size = os.fstat(fd).st_size
    if size > max_bytes:
        raise ToolError(f"{shown!r} has {size} bytes, above the {max_bytes}-byte limit for editing")
    chunks, total = [], 0
    while chunk := os.read(fd, max_bytes + 1 - total):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise ToolError(f"{shown!r} grew above the {max_bytes}-byte limit for editing while it was read")
    return b"".join(chunks)


def _decode(data: bytes, shown: str) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(f"{shown!r} looks like a binary file ({len(data)} bytes); only text files can be read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Rewriting a file decoded with replacement characters would corrupt its other bytes.
        raise ToolError(f"{shown!r} is not valid UTF-8 (byte {exc.start}); it cannot be edited safely") from exc


def _write_all(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _match_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (found := text.find(needle, start)) != -1:
        lines.append(text.count("\n", 0, found) + 1)
        start = found + 1
    return lines


def register_file_tools(server: MCPServer, ws: WorkspaceContext) -> None:
    """Add ``read_file``, ``write_file``, ``edit_file``, ``list_directory``, ``move``, ``delete``."""

    @tool(server, READ_ONLY)
    async def read_file(
        path: PathArg,
        start_line: Annotated[int, Field(ge=1, description="First line to return (1-based).")] = 1,
        max_lines: Annotated[
            int | None, Field(ge=1, description="How many lines to return; omit for the rest of the file.")
        ] = None,
    ) -> str:
        """Read a UTF-8 text file in the workspace and return its text (optionally a range of lines).

        Large files: pass `start_line` and `max_lines` to page through them. The result is cut at
        about 100,000 characters, and a line longer than 64 KiB is cut; a final line in square
        brackets then says which lines were shown and how to continue. Binary files, FIFOs and
        devices are refused.
        """
        return await ws.run(_read_file, ws, path, start_line, max_lines)

    @tool(server, WRITES)
    async def write_file(
        path: PathArg,
        content: Annotated[str, Field(description="The complete new text of the file (UTF-8).")],
    ) -> str:
        """Create a text file in the workspace, or replace the whole content of an existing one.

        Missing parent directories are created. To change part of a file, prefer `edit_file`.
        """
        return await ws.run(_write_file, ws, path, content)

    @tool(server, WRITES)
    async def edit_file(
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
        return await ws.run(_edit_file, ws, path, old_text, new_text)

    @tool(server, READ_ONLY)
    async def list_directory(
        path: Annotated[str, Field(description="Directory relative to the workspace root.")] = ".",
        show_hidden: Annotated[bool, Field(description="Include names starting with '.'.")] = False,
    ) -> str:
        """List one directory of the workspace: one entry per line, directories end with '/'.

        Each line is `name/` for a directory, `name  (N bytes)` for a file and `name -> target`
        for a symlink. Use `glob` to find files recursively.
        """
        return await ws.run(_list_directory, ws, path, show_hidden)

    @tool(server, DESTROYS)
    async def move(
        source: Annotated[str, Field(description="File or directory to move, relative to the root.")],
        destination: Annotated[str, Field(description="New path, relative to the root.")],
        overwrite: Annotated[bool, Field(description="Replace an existing destination file.")] = False,
    ) -> str:
        """Move or rename a file or directory inside the workspace.

        Refused if the destination exists, unless `overwrite` is true (files only).
        """
        return await ws.run(_move, ws, source, destination, overwrite)

    @tool(server, DESTROYS)
    async def delete(
        path: PathArg,
        recursive: Annotated[bool, Field(description="Required to delete a directory and all its contents.")] = False,
    ) -> str:
        """Delete a file, a symlink (not its target) or, with `recursive=true`, a directory tree."""
        return await ws.run(_delete, ws, path, recursive)


def _read_file(ws: WorkspaceContext, path: str, start_line: int, max_lines: int | None) -> str:
    limits = ws.limits

    def read(parent: int, name: str) -> str:
        fd = open_regular(parent, name, os.O_RDONLY, path)
        try:
            size = os.fstat(fd).st_size
            if size > limits.max_read_bytes and max_lines is None:
                raise ToolError(
                    f"{path!r} has {size} bytes, above the {limits.max_read_bytes}-byte limit for a whole read; "
                    "pass start_line and max_lines to read part of it"
                )
            found = read_lines(fd, path, start_line, max_lines, limits.max_output_chars, limits.max_line_bytes)
        finally:
            os.close(fd)
        text = b"".join(found.lines).decode("utf-8", errors="replace")
        last = start_line - 1 + found.count
        if found.cut_lines:
            text += f"\n[{found.cut_lines} lines longer than {limits.max_line_bytes} bytes were cut]"
        if found.more:
            text += f"\n[shown lines {start_line}-{last}; more follow: call again with start_line={last + 1}]"
        elif not found.lines and start_line > 1:
            text = f"[{path!r} has fewer than {start_line} lines]"
        return text

    with os_errors("read", path):
        return ws.confinement.at(path, read)


def _write_file(ws: WorkspaceContext, path: str, content: str) -> str:
    data = content.encode("utf-8", errors="replace")

    def write(parent: int, name: str) -> bool:
        try:
            fd, existed = open_regular(parent, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, path), False
        except FileExistsError:
            fd, existed = open_regular(parent, name, os.O_WRONLY, path), True
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        return existed

    with os_errors("write", path):
        existed = ws.confinement.at(path, write, create_parents=True)
    return f"{'overwrote' if existed else 'created'} {ws.confinement.display(path)} ({len(data)} bytes)"


def _edit_file(ws: WorkspaceContext, path: str, old_text: str, new_text: str) -> str:
    def edit(parent: int, name: str) -> int:
        fd = open_regular(parent, name, os.O_RDWR, path)
        try:
            text = _decode(_read_all(fd, path, ws.limits.max_read_bytes), path)
            where = _match_lines(text, old_text)
            if not where:
                raise ToolError(
                    f"old_text was not found in {path!r}; nothing changed (read the file to copy it exactly)"
                )
            if len(where) > 1:
                shown = ", ".join(map(str, where[:20]))
                raise ToolError(
                    f"old_text occurs {len(where)} times in {path!r} (lines {shown}); nothing changed: "
                    "include more surrounding text so that it matches exactly once"
                )
            _write_all(fd, text.replace(old_text, new_text, 1).encode("utf-8"))
        finally:
            os.close(fd)
        return where[0]

    with os_errors("edit", path):
        line = ws.confinement.at(path, edit)
    return f"edited {ws.confinement.display(path)}: replaced 1 occurrence at line {line}"


def _list_directory(ws: WorkspaceContext, path: str, show_hidden: bool) -> str:
    def listing(parent: int, name: str) -> list[str]:
        try:
            fd = open_dir_at(parent, name)
        except NotADirectoryError as exc:
            raise ToolError(f"{path!r} is a file, not a directory; use read_file to read it") from exc
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda e: e.name)
            lines: list[str] = []
            for entry in entries:
                if entry.name.startswith(".") and not show_hidden:
                    continue
                if len(lines) >= ws.limits.max_results:
                    lines.append(f"[listing cut at {ws.limits.max_results} entries]")
                    break
                lines.append(_describe_entry(entry, fd))
            return lines
        finally:
            os.close(fd)

    with os_errors("list", path):
        lines = ws.confinement.at(path, listing)
    header = f"{ws.confinement.display(path)}/ ({len(lines)} entries)"
    return "\n".join([header, *lines]) if lines else f"{header}: empty"


def _move(ws: WorkspaceContext, source: str, destination: str, overwrite: bool) -> str:
    def from_source(src_dir: int, src: str) -> None:
        if src == ".":
            raise ToolError("the workspace root itself cannot be moved")
        src_kind = os.stat(src, dir_fd=src_dir, follow_symlinks=False).st_mode
        ws.confinement.at(destination, lambda dst_dir, dst: to_destination(src_dir, src, src_kind, dst_dir, dst),
                          follow=False, create_parents=True)  # fmt: skip

    def to_destination(src_dir: int, src: str, src_kind: int, dst_dir: int, dst: str) -> None:
        try:
            dst_kind: int | None = os.stat(dst, dir_fd=dst_dir, follow_symlinks=False).st_mode
        except FileNotFoundError:
            dst_kind = None
        if dst == "." or (dst_kind is not None and (not overwrite or stat.S_ISDIR(dst_kind))):
            raise ToolError(f"cannot move to {destination!r}: it exists (pass overwrite=true to replace a file)")
        try:
            os.rename(src, dst, src_dir_fd=src_dir, dst_dir_fd=dst_dir)
        except OSError as exc:
            if exc.errno == errno.EINVAL and stat.S_ISDIR(src_kind):
                raise ToolError(f"cannot move {source!r} into itself ({destination!r})") from exc
            if exc.errno == errno.EXDEV:
                reason = "they are on different file systems"
                raise ToolError(f"cannot move {source!r} to {destination!r}: {reason}") from exc
            raise

    with os_errors("move", source):
        ws.confinement.at(source, from_source, follow=False)
    return f"moved {ws.confinement.display(source)} -> {ws.confinement.display(destination)}"


def _delete(ws: WorkspaceContext, path: str, recursive: bool) -> str:
    def remove(parent: int, name: str) -> None:
        if name == ".":
            raise ToolError("the workspace root itself cannot be deleted")
        if stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            if not recursive:
                raise ToolError(f"{path!r} is a directory; pass recursive=true to delete it and its contents")
            # rmtree with dir_fd works on descriptors too and never follows a symlink it meets.
            shutil.rmtree(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)

    with os_errors("delete", path):
        ws.confinement.at(path, remove, follow=False)
    return f"deleted {ws.confinement.display(path)}"


def _describe_entry(entry: os.DirEntry[str], parent: int) -> str:
    if entry.is_symlink():
        return f"{entry.name} -> {os.readlink(entry.name, dir_fd=parent)}"
    if entry.is_dir(follow_symlinks=False):
        return f"{entry.name}/"
    return f"{entry.name}  ({entry.stat(follow_symlinks=False).st_size} bytes)"
