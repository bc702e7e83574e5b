"""A server's call slots: at most so many calls at once, the rest queued first come, first served.

What ``anyio.CapacityLimiter`` does for the supervisor, at a fraction of its cost for a queued
call (measured at ~50 k instructions per queued call there: two ``WouldBlock`` raised and caught,
an ``asyncio.Event`` per wait, a borrower set keyed by task). A slot is a count, not a task's
token: it may be released by another task than the one that took it, and one task may hold
several (a nested call). A released slot is handed to the first caller in line, so a newcomer
never overtakes the queue. On asyncio a waiter is a bare future of the loop; elsewhere (trio) an
``anyio.Event``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

import anyio

__all__ = ["CallSlots"]


class _Turn:
    """One queued caller on a backend other than asyncio: its event and whether a slot was handed to it."""

    __slots__ = ("event", "handed")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.handed = False


class CallSlots:
    """``total`` call slots; :meth:`take` one at once or :meth:`wait` for one in turn, then :meth:`release` it.

    Args:
        total: how many calls may hold a slot at once (at least 1).
    """

    __slots__ = ("_queue", "total", "used")

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError(f"call slots need a total of at least 1, not {total}")
        self.total = total
        self.used = 0
        """Slots held now (a slot handed to a queued caller counts from the moment it is handed)."""
        self._queue: deque[asyncio.Future[None] | _Turn] = deque()

    @property
    def queued(self) -> int:
        """Callers waiting in line for a slot."""
        return len(self._queue)

    def take(self) -> bool:
        """Take a free slot at once, unless someone is already in line; whether one was taken."""
        if self.used < self.total and not self._queue:
            self.used += 1
            return True
        return False

    async def wait(self) -> None:
        """Wait in line for a slot (after :meth:`take` said no). Cancelled, the caller holds none."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no asyncio loop runs this task (trio)
            loop = None
        if loop is None:
            await self._wait_turn()
            return
        future: asyncio.Future[None] = loop.create_future()
        self._queue.append(future)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():  # handed a slot just before the cancellation
                self.release()
            else:
                self._forget(future)
            raise

    async def _wait_turn(self) -> None:
        turn = _Turn()
        self._queue.append(turn)
        try:
            await turn.event.wait()
        except BaseException:
            if turn.handed:
                self.release()
            else:
                self._forget(turn)
            raise

    def _forget(self, waiter: asyncio.Future[None] | _Turn) -> None:
        with contextlib.suppress(ValueError):  # already taken off the line by release()
            self._queue.remove(waiter)

    def release(self) -> None:
        """Give a slot back: to the first caller in line, else to the free ones."""
        queue = self._queue
        while queue:
            waiter = queue.popleft()
            if isinstance(waiter, _Turn):
                waiter.handed = True
                waiter.event.set()
                return
            if not waiter.done():  # a cancelled waiter's future is done: it needs no slot
                waiter.set_result(None)
                return
        if self.used <= 0:
            raise RuntimeError("a call slot was released more often than taken")
        self.used -= 1
