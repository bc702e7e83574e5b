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

Replicas of a gateway share one queue through a :class:`HeldBoard` (the database): each shows every
replica's held calls, and an answer given on any of them releases the call where it waits (told
at once by an event, :meth:`PendingApprovals.heard`, and looked up every :data:`BOARD_POLL_S`
should an event be lost).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpmux.errors import NotFound
from mcpmux.policy.approval import Answer, ApprovalRequest
from mcpmux.policy.audit import redact_arguments

__all__ = ["DEFAULT_PENDING_TIMEOUT_S", "HeldApproval", "HeldBoard", "PendingApprovals"]

logger = logging.getLogger(__name__)

DEFAULT_PENDING_TIMEOUT_S = 120.0
ID_BYTES = 12
_SUBSCRIBER_BUFFER = 64
BOARD_POLL_S = 2.0


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


class HeldBoard(Protocol):
    """Where the replicas of a gateway post their held calls and answer each other's
    (:class:`mcpmux.serve.cluster.SharedHeld`). Its methods block (they reach a database)."""

    def post(self, held: HeldApproval) -> None: ...

    def withdraw(self, held_id: str) -> None: ...

    def take(self, held_id: str, answer: Answer, by: str) -> HeldApproval | None:
        """Answer a call waiting anywhere, unless it was answered or expired; the call as answered."""
        ...

    def answer_of(self, held_id: str) -> tuple[Answer, str] | None: ...

    def listed(self) -> list[HeldApproval]:
        """Every call waiting for an answer, on every replica."""
        ...


class PendingApprovals:
    """The queue of held approval questions; an :class:`~mcpmux.policy.Approver` itself.

    Args:
        timeout_s: how long a call waits for a person before it is denied.
        secrets: values to mask in the arguments shown (the configuration's secrets).
        board: shared with other replicas (``None``: this process alone).
    """

    def __init__(
        self, timeout_s: float = DEFAULT_PENDING_TIMEOUT_S, secrets: Iterable[str] = (), board: HeldBoard | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.board = board
        self._secrets = tuple(secrets)
        self._held: dict[str, HeldApproval] = {}
        self._subscribers: list[MemoryObjectSendStream[str]] = []

    def held(self) -> list[HeldApproval]:
        """The calls waiting now, oldest first (with a board: on every replica)."""
        waiting = dict(self._held)
        if self.board is not None:
            for held in self.board.listed():
                waiting.setdefault(held.id, held)
        return sorted(waiting.values(), key=lambda h: h.held_at)

    async def __call__(self, request: ApprovalRequest) -> Answer:
        """Hold ``request`` until a person answers it or the timeout denies it."""
        now = time.time()
        arguments = redact_arguments(dict(request.arguments), self._secrets)
        held = HeldApproval(secrets.token_urlsafe(ID_BYTES), request, arguments, now, now + self.timeout_s)
        self._held[held.id] = held
        logger.info("%s (caller %s) waits for a person's approval", request.name, request.caller or "unknown")
        withdrawn = False
        try:
            if self.board is not None:
                await anyio.to_thread.run_sync(self.board.post, held)
            self._notify("held")
            with anyio.move_on_after(self.timeout_s):
                await self._wait(held)
        except anyio.get_cancelled_exc_class():
            withdrawn = True  # the caller went away (a REST client disconnected, a deadline): nothing to approve
            raise
        finally:
            self._held.pop(held.id, None)
            if held.answer is None and withdrawn:
                held.answer, held.answered_by = Answer.NO, "withdrawn"
                logger.info("%s: its caller went away; withdrawn from the queue", request.name)
            elif held.answer is None:
                held.answer, held.answered_by = Answer.NO, "timeout"
                logger.info("%s: no one answered in %.0f s; denied", request.name, self.timeout_s)
            if self.board is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.board.withdraw, held.id)
            self._notify("answered")
        return held.answer

    async def _wait(self, held: HeldApproval) -> None:
        """Until ``held`` is answered here, or (with a board) on another replica."""
        if self.board is None:
            await held._done.wait()
            return
        while not held._done.is_set():
            with anyio.move_on_after(BOARD_POLL_S):
                await held._done.wait()
            if not held._done.is_set():
                self._answered_elsewhere(held, await anyio.to_thread.run_sync(self.board.answer_of, held.id))

    def _answered_elsewhere(self, held: HeldApproval, found: tuple[Answer, str] | None) -> None:
        if found is not None and held.answer is None:
            held.answer, held.answered_by = found
            logger.info("%s %s by %s (on another replica)", held.request.name, held.answer.value, held.answered_by)
            held._done.set()

    def heard(self, held_id: str) -> None:
        """Another replica held or answered ``held_id`` (``*``: anything may have changed): look now."""
        held = self._held.get(held_id)
        if held is not None and self.board is not None:
            self._answered_elsewhere(held, self.board.answer_of(held_id))
        self._notify("held")

    def answer(self, held_id: str, answer: Answer, *, by: str) -> HeldApproval:
        """Answer the held call ``held_id`` (its caller goes on at once, on whichever replica it waits).

        Raises:
            NotFound: no call with that id is waiting (answered already, timed out, or never held).
        """
        held = self._held.get(held_id)
        if held is None and self.board is not None:
            taken = self.board.take(held_id, answer, by)
            if taken is not None:
                logger.info("%s %s by %s (waiting on another replica)", taken.request.name, answer.value, by)
                return taken
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
