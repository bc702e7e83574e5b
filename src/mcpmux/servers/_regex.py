"""Linear-time regular expressions for the built-in tools, on RE2 (PyPI ``google-re2``).

Python's ``re`` backtracks: ``^(a+)+$`` on 25 characters runs for seconds while holding the GIL,
which stalls every client and server of the process. RE2 runs in time linear in the input and
has no backreferences or lookaround; a pattern using them is refused with a message saying so.
This is the one module that imports ``re2``, which ships no type information.
"""

from __future__ import annotations

from typing import Protocol, cast

import re2  # type: ignore[import-untyped]
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["Matcher", "compile_linear"]

MAX_PROGRAM_BYTES = 8 * 1024 * 1024
_UNSUPPORTED_HINT = (
    "grep uses RE2 (linear time): backreferences (\\1), lookahead/lookbehind ((?=..), (?<=..)), "
    "possessive quantifiers and atomic groups are not supported"
)


class Matcher(Protocol):
    """A compiled pattern: ``search(text)`` is truthy when ``text`` has a match."""

    def search(self, text: str) -> object: ...


def compile_linear(pattern: str, *, ignore_case: bool = False, what: str = "regular expression") -> Matcher:
    """Compile ``pattern`` with RE2.

    Raises:
        ToolError: the pattern is invalid, uses syntax RE2 does not have, or needs too much memory.
    """
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # RE2 would print every parse error on the process's stderr
    options.max_mem = MAX_PROGRAM_BYTES
    try:
        return cast(Matcher, re2.compile(pattern, options))
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        hint = f"; {_UNSUPPORTED_HINT}" if _looks_unsupported(reason) else ""
        raise ToolError(f"invalid {what} {pattern!r}: {reason}{hint}") from exc


def _looks_unsupported(reason: str) -> bool:
    return any(word in reason for word in ("invalid perl operator", "invalid escape sequence", "bad repetition"))
