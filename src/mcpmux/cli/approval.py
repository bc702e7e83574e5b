"""Approval in a terminal: show the call, ask yes / no / always for this tool / always for this server."""

from __future__ import annotations

import json
import sys
from typing import TextIO

import anyio

from mcpmux.policy import Answer, ApprovalRequest

__all__ = ["approve_this_invocation", "terminal_approver"]

_CHOICES = {
    "y": Answer.YES,
    "yes": Answer.YES,
    "n": Answer.NO,
    "no": Answer.NO,
    "": Answer.NO,
    "t": Answer.ALWAYS_TOOL,
    "s": Answer.ALWAYS_SERVER,
}
ARGUMENT_PREVIEW_CHARS = 600


def terminal_approver() -> TerminalApprover | None:
    """An approver that asks on the controlling terminal, or ``None`` when there is no terminal."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    return TerminalApprover(sys.stdin, sys.stderr)


async def approve_this_invocation(request: ApprovalRequest) -> Answer:
    """``--yes``: approve each call that asks, for this command only (never remembered).

    The guard consults an approver only after its deny rules and pins have let the call through, so
    ``--yes`` cannot override a deny rule or a quarantined tool.
    """
    sys.stderr.write(f"mcpmux: {request.name} approved by --yes ({request.reason})\n")
    return Answer.YES


class TerminalApprover:
    """Asks on ``answers`` / ``questions`` (stdin / stderr); reading happens off the event loop."""

    def __init__(self, answers: TextIO, questions: TextIO) -> None:
        self._in, self._out = answers, questions
        self._lock = anyio.Lock()

    async def __call__(self, request: ApprovalRequest) -> Answer:
        # One question at a time, even when a model asks for several calls in parallel.
        async with self._lock:
            return await anyio.to_thread.run_sync(self._ask, request)

    def _ask(self, request: ApprovalRequest) -> Answer:
        arguments = json.dumps(dict(request.arguments), ensure_ascii=False)
        if len(arguments) > ARGUMENT_PREVIEW_CHARS:
            arguments = arguments[:ARGUMENT_PREVIEW_CHARS] + f"… ({len(arguments)} characters)"
        self._out.write(f"\nmcpmux: approval needed for {request.name} ({request.reason})\n  arguments: {arguments}\n")
        while True:
            self._out.write("Allow? [y]es, [N]o, always for this [t]ool, always for this [s]erver: ")
            self._out.flush()
            line = self._in.readline()
            if not line:
                return Answer.NO
            answer = _CHOICES.get(line.strip().lower())
            if answer is not None:
                return answer
