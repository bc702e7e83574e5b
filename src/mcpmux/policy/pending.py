"""Calls held for a person: approval questions that wait in a queue until someone answers them.

A network caller of the gateway may not answer its own approval question (a page in a browser
could say yes to itself). With the console served, such a call is not refused at once: it waits
here, the console shows it (caller, tool, redacted arguments, the rule that asks), a person
answers "approve once", "always for this tool" or "deny", and the waiting call goes on at once.
No answer within the timeout is "deny".

::

    pending = PendingApprovals(timeout_s=120)
    answer = await pending(request)          # an Approver: waits for pending.answer(...)
    pending.answer(held.id, Answer.YES, by="token:alice")
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpmux.errors import NotFound
from mcpmux.policy.approval import Answer, ApprovalRequest
from mcpmux.policy.audit import redact_arguments

__all__ = ["DEFAULT_PENDING_TIMEOUT_S", "HeldApproval", "PendingApprovals"]

logger = logging.getLogger(__name__)

DEFAULT_PENDING_TIMEOUT_S = 120.0
ID_BYTES = 12
_SUBSCRIBER_BUFFER = 64


@dataclass(slots=True)
class HeldApproval:
    """One call waiting for a person.

    Attributes:
        id: random, unguessable (it is what an answer names).
        request: the question as the guard asked it (arguments unredacted: never shown as is).
        arguments: the arguments as shown to people (redacted like the audit log).
        held_at, expires_at: epoch seconds.
        answer, answered_by: set once answered (``answered_by`` is ``timeout`` when no one did).
    """

    id: str
    request: ApprovalRequest
    arguments: Any
    held_at: float
    expires_at: float
    answer: Answer | None = None
    answered_by: str | None = None
    _done: anyio.Event = field(default_factory=anyio.Event, repr=False)

    def to_json(self) -> dict[str, Any]:
        """What a console or API shows (never the unredacted arguments)."""
        r = self.request
        return {
            "id": self.id, "name": r.name, "server": r.server, "tool": r.tool, "caller": r.caller, "face": r.face,
            "rule": r.reason, "arguments": self.arguments, "held_at": self.held_at, "expires_at": self.expires_at,
        }  # fmt: skip


class PendingApprovals:
    """The queue of held approval questions; an :class:`~mcpmux.policy.Approver` itself.

    Args:
        timeout_s: how long a call waits for a person before it is denied.
        secrets: values to mask in the arguments shown (the configuration's secrets).
    """

    def __init__(self, timeout_s: float = DEFAULT_PENDING_TIMEOUT_S, secrets: Iterable[str] = ()) -> None:
        self.timeout_s = timeout_s
        self._secrets = tuple(secrets)
        self._held: dict[str, HeldApproval] = {}
        self._subscribers: list[MemoryObjectSendStream[str]] = []

    def held(self) -> list[HeldApproval]:
        """The calls waiting now, oldest first."""
        return sorted(self._held.values(), key=lambda h: h.held_at)

    async def __call__(self, request: ApprovalRequest) -> Answer:
        """Hold ``request`` until a person answers it or the timeout denies it."""
        now = time.time()
        arguments = redact_arguments(dict(request.arguments), self._secrets)
        held = HeldApproval(secrets.token_urlsafe(ID_BYTES), request, arguments, now, now + self.timeout_s)
        self._held[held.id] = held
        logger.info("%s (caller %s) waits for a person's approval", request.name, request.caller or "unknown")
        self._notify("held")
        try:
            with anyio.move_on_after(self.timeout_s):
                await held._done.wait()
        finally:
            self._held.pop(held.id, None)
            if held.answer is None:
                held.answer, held.answered_by = Answer.NO, "timeout"
                logger.info("%s: no one answered in %.0f s; denied", request.name, self.timeout_s)
            self._notify("answered")
        return held.answer

    def answer(self, held_id: str, answer: Answer, *, by: str) -> HeldApproval:
        """Answer the held call ``held_id`` (its caller goes on at once).

        Raises:
            NotFound: no call with that id is waiting (answered already, timed out, or never held).
        """
        held = self._held.get(held_id)
        if held is None or held.answer is not None:
            raise NotFound("held call", held_id, [], hint="it was answered or timed out already: reload the list")
        held.answer, held.answered_by = answer, by
        logger.info("%s %s by %s", held.request.name, answer.value, by)
        held._done.set()
        return held

    @asynccontextmanager
    async def changes(self) -> AsyncIterator[MemoryObjectReceiveStream[str]]:
        """A stream of ``held``/``answered`` events while the block runs (a slow reader misses some)."""
        send, receive = anyio.create_memory_object_stream[str](_SUBSCRIBER_BUFFER)
        self._subscribers.append(send)
        try:
            yield receive
        finally:
            self._subscribers.remove(send)
            send.close()
            receive.close()

    def _notify(self, event: str) -> None:
        for subscriber in list(self._subscribers):
            # A reader that is behind re-reads the whole list on the next event anyway.
            with contextlib.suppress(anyio.WouldBlock):
                subscriber.send_nowait(event)
