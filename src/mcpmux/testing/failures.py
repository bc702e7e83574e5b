"""Failures a :class:`~mcpmux.testing.MockServer` can inject, per tool or for every call.

Each failure is a small frozen value that serialises to JSON (so a mock run as a child process
over stdio misbehaves the same way). They act on a call in the order they were added:

- :class:`Delay` waits, then lets the call go on;
- :class:`Hang` never answers (a client's cancellation still ends the call);
- :class:`Crash` ends the server: a child process exits mid-call (code 1, a line on stderr), a
  server served in-process or on a socket drops every open session (the listener stays, like a
  supervisor restarting the server), a Streamable HTTP or SSE server restarts on the same port
  (sessions lost);
- :class:`Error` answers with a JSON-RPC error (``code``, ``message``);
- :class:`GarbageOutput` writes a line that is not JSON-RPC (a child, on its stdout), then
  answers the call with a result that is not a valid ``CallToolResult``;
- :class:`HugeResult` answers with a text of ``mb`` megabytes;
- :class:`ListChangedAfter` changes the tool list once ``n`` calls were made (a tool
  ``added_after_<n>`` appears) and sends ``notifications/tools/list_changed``.

:class:`Startup` is how the server starts rather than how it answers a call: slowly (a cold
``npx`` start), after a banner of non-JSON lines on stdout, or not at all (an exit before the
handshake, with a reason on stderr).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from mcpmux.errors import UsageError

__all__ = [
    "Crash",
    "Delay",
    "Error",
    "Failure",
    "GarbageOutput",
    "Hang",
    "HugeResult",
    "ListChangedAfter",
    "Startup",
    "failure_from_json",
    "failure_to_json",
]


@dataclass(frozen=True, slots=True)
class Delay:
    """Wait ``seconds`` before answering."""

    seconds: float
    kind: Literal["delay"] = "delay"


@dataclass(frozen=True, slots=True)
class Hang:
    """Never answer."""

    kind: Literal["hang"] = "hang"


@dataclass(frozen=True, slots=True)
class Crash:
    """End the server in the middle of the call (see the module docstring for each transport)."""

    exit_code: int = 1
    kind: Literal["crash"] = "crash"


@dataclass(frozen=True, slots=True)
class Error:
    """Answer with the JSON-RPC error ``code`` / ``message``."""

    code: int
    message: str
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class GarbageOutput:
    """Write a non-JSON line where the transport allows, then answer with an invalid result."""

    kind: Literal["garbage_output"] = "garbage_output"


@dataclass(frozen=True, slots=True)
class HugeResult:
    """Answer with ``mb`` megabytes of text."""

    mb: float
    kind: Literal["huge_result"] = "huge_result"


@dataclass(frozen=True, slots=True)
class ListChangedAfter:
    """After ``n`` calls, add a tool ``added_after_<n>`` and announce ``tools/list_changed``."""

    n: int
    kind: Literal["list_changed_after"] = "list_changed_after"


@dataclass(frozen=True, slots=True)
class Startup:
    """How a mock starts: each session (or the child process) before it answers anything.

    Attributes:
        delay: seconds of silence before anything is answered (a child sleeps before it reads stdin).
        garbage_lines: non-JSON lines a child writes on its stdout before it serves (a banner).
        exit_code: when set, the server never serves: a child writes ``stderr`` and exits with this
            code; in-process and socket sessions end at once (their streams close).
        stderr: the line a child writes on stderr before exiting (``exit_code``).
    """

    delay: float = 0.0
    garbage_lines: int = 0
    exit_code: int | None = None
    stderr: str = ""

    def to_json(self) -> dict[str, Any]:
        """This startup as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Startup:
        """The startup a :meth:`to_json` object describes (the default for ``None``).

        Raises:
            UsageError: fields that do not fit.
        """
        try:
            return cls(**(data or {}))
        except TypeError as exc:
            raise UsageError(f"invalid mock startup {data!r}: {exc}") from exc


Failure = Delay | Hang | Crash | Error | GarbageOutput | HugeResult | ListChangedAfter

_KINDS: dict[str, type[Failure]] = {
    "delay": Delay,
    "hang": Hang,
    "crash": Crash,
    "error": Error,
    "garbage_output": GarbageOutput,
    "huge_result": HugeResult,
    "list_changed_after": ListChangedAfter,
}


def failure_to_json(failure: Failure) -> dict[str, Any]:
    """``failure`` as a JSON object (its fields and ``kind``)."""
    return asdict(failure)


def failure_from_json(data: dict[str, Any]) -> Failure:
    """The failure a :func:`failure_to_json` object describes.

    Raises:
        UsageError: an unknown ``kind`` or fields that do not fit it.
    """
    kind = data.get("kind")
    cls = _KINDS.get(str(kind))
    if cls is None:
        raise UsageError(f"unknown mock failure kind {kind!r}", hint=f"one of: {', '.join(sorted(_KINDS))}")
    try:
        return cls(**data)
    except TypeError as exc:
        raise UsageError(f"invalid mock failure {data!r}: {exc}") from exc
