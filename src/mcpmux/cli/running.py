"""The event loop of a CLI command that runs to its end, and what Ctrl-C does to it.

asyncio's runner answers the first Ctrl-C by cancelling the command's task once: an edge. Code deep
in a library that catches that one cancellation and carries on swallows it (seen with ``mcpmux test``
of a server that never answers: about one Ctrl-C in two was lost, and the command then waited out
its whole connect timeout). Here the first Ctrl-C cancels an anyio scope around the command instead,
which stays cancelled until the command has left it: a level. Every await after it is cancelled
too, so the command unwinds, closing what it opened (the stops of its children are shielded and
bounded), and :class:`KeyboardInterrupt` is raised (exit 130, "Interrupted."), also when the
unwinding ended in an error (a connection cut short by the cancellation once said "connect timed
out"). A second Ctrl-C interrupts the unwinding itself.

Commands that serve until stopped (``serve``, ``api``, ``daemon run``) handle their signals
themselves, to drain: they do not use this.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, Unpack

import anyio

__all__ = ["run"]

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


def run(body: Callable[[Unpack[_Args]], Awaitable[_T]], *args: *_Args) -> _T:
    """``anyio.run(body, *args)``, where Ctrl-C cancels ``body`` for good and then raises :class:`KeyboardInterrupt`."""

    async def main() -> _T:
        loop = asyncio.get_running_loop()
        interrupted = False
        with anyio.CancelScope() as scope:

            def interrupt() -> None:
                nonlocal interrupted
                interrupted = True
                loop.remove_signal_handler(signal.SIGINT)  # a second Ctrl-C raises at once
                scope.cancel()

            # Ctrl-C ignored by whoever started us (a background job, nohup) stays ignored; signals
            # reach the main thread only (a command run in a worker thread, as tests do, watches none).
            watched = (
                threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
            )
            if watched:
                loop.add_signal_handler(signal.SIGINT, interrupt)
            try:
                return await body(*args)
            except Exception as exc:
                if interrupted:  # what the unwinding raised is the interrupt's doing, and said as one
                    raise KeyboardInterrupt from exc
                raise
            finally:
                if watched and not interrupted:
                    loop.remove_signal_handler(signal.SIGINT)
        raise KeyboardInterrupt  # only a Ctrl-C cancels the scope

    return anyio.run(main)
