"""Reading a range of lines from an open file in bounded memory (the workspace's ``read_file``).

The file is read in chunks; lines before the range are counted, never kept; a line longer than
:attr:`~mcpmux.servers.workspace_context.WorkspaceLimits.max_line_bytes` is cut and the rest of it
skipped. Memory stays at a few chunks whatever the file holds (a 300 MB file with no newline
included), and the work stops at the call's cancellation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.servers.workspace_context import check_cancelled

__all__ = ["CHUNK_BYTES", "LineRange", "read_lines"]

CHUNK_BYTES = 256 * 1024


@dataclass(slots=True)
class LineRange:
    """What :func:`read_lines` found: the chosen lines, and whether more follow."""

    lines: list[bytes] = field(default_factory=list)
    cut_lines: int = 0
    more: bool = False

    @property
    def count(self) -> int:
        """How many lines were chosen."""
        return len(self.lines)


def read_lines(fd: int, shown: str, start: int, max_lines: int | None, cap: int, line_cap: int) -> LineRange:
    """Lines ``start`` (1-based) .. ``start + max_lines - 1`` of ``fd``, at most ``cap`` bytes in all.

    Raises:
        ToolError: the file has a NUL byte in what was scanned (a binary file).
    """
    found = LineRange()
    number, used, partial, skipping = 1, 0, bytearray(), False
    stop = None if max_lines is None else start + max_lines
    while chunk := os.read(fd, CHUNK_BYTES):
        check_cancelled()
        if b"\x00" in chunk:
            raise ToolError(f"{shown!r} looks like a binary file; only text files can be read")
        pieces = chunk.split(b"\n")
        for index, piece in enumerate(pieces):
            ends = index < len(pieces) - 1
            if number >= start and not skipping:
                room = min(line_cap, cap - used) - len(partial)
                partial += piece[: max(room, 0)]
                skipping = len(piece) > room
            if not ends:
                break
            if number >= start:
                if found.lines and used + len(partial) + 1 > cap:
                    found.more = True
                    return found
                found.lines.append(bytes(partial) + b"\n")
                found.cut_lines += skipping
                used += len(partial) + 1
            partial, skipping, number = bytearray(), False, number + 1
            if stop is not None and number >= stop:
                found.more = _has_more(fd, pieces, index)
                return found
            if used >= cap:
                found.more = True
                return found
    if partial or skipping:
        found.lines.append(bytes(partial))
        found.cut_lines += skipping
    return found


def _has_more(fd: int, pieces: list[bytes], index: int) -> bool:
    rest = pieces[index + 1 :]
    if len(rest) > 1 or (rest and rest[0]):
        return True
    return os.read(fd, 1) != b""
