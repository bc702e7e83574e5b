"""Connecting the servers of a one-shot command: what is pending, and what could not be used.

While servers connect, a terminal on stderr shows which ones are still pending and for how long
(nothing is drawn when stderr is not a terminal). Afterwards a server the command addressed by
name that is not usable is an error carrying its own evidence (exit 3, or 4 when it needs
authentication); any other unusable server is one warning line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio

from mcpmux.cli.output import err_console
from mcpmux.config.display import mask_secrets
from mcpmux.errors import MCPMuxError, ServerUnavailable

if TYPE_CHECKING:
    from rich.status import Status

    from mcpmux.config import Config
    from mcpmux.host import ConnectionFactory, Host
    from mcpmux.policy import Guard
    from mcpmux.types import ServerStatus

__all__ = [
    "CONNECTION_FACTORY_KEY",
    "daemon_factory",
    "pending_line",
    "raise_if_unusable",
    "wait_with_progress",
    "warn_unusable",
]

CONNECTION_FACTORY_KEY = "mcpmux.connection_factory"
"""The root context's ``meta`` key of :func:`daemon_factory`, for faces the CLI launches (the chat)."""

PROGRESS_INTERVAL_S = 0.2
PENDING_SHOWN = 4
_USABLE = frozenset({"connected", "disabled", "configured"})


def daemon_factory(config: Config) -> ConnectionFactory | None:
    """How a command's host opens its servers: through ``mcpmux daemon`` unless it is off (docs/daemon.md).

    The one place a command chooses: ``--daemon``/``--no-daemon``, else ``MCPMUX_DAEMON``, else
    ``settings.daemon``.
    """
    from mcpmux.attach.client import connection_factory
    from mcpmux.cli.output import state

    return connection_factory(config, state().daemon)


async def wait_with_progress(host: Host) -> None:
    """Wait for the first connect attempt of each server ``host`` (started with ``wait=False``) asked to start."""
    waiting = bool(host.pending())
    status = err_console().status("connecting to servers...") if sys.stderr.isatty() and waiting else None
    if status is not None:
        status.start()
    try:
        async with anyio.create_task_group() as tg:
            if status is not None:
                tg.start_soon(_tick, host, status, time.monotonic())
            await host.wait_started()
            tg.cancel_scope.cancel()
    finally:
        if status is not None:
            status.stop()


async def _tick(guard: Guard, status: Status, started: float) -> None:
    while True:
        status.update(pending_line(guard.status(), time.monotonic() - started))
        await anyio.sleep(PROGRESS_INTERVAL_S)


def pending_line(statuses: Iterable[ServerStatus], elapsed_s: float) -> str:
    """``connecting: 2 of 5 ready, waiting for github, slack (3.2 s)``."""
    rows = list(statuses)
    pending = [s.name for s in rows if s.state.value in ("starting", "degraded")]
    ready = sum(1 for s in rows if s.state.value == "connected")
    more = len(pending) - PENDING_SHOWN
    shown = ", ".join(pending[:PENDING_SHOWN]) + (f" and {more} more" if more > 0 else "")
    waiting = f", waiting for {shown}" if pending else ""
    return f"connecting: {ready} of {len(rows)} ready{waiting} ({elapsed_s:.1f} s)"


def raise_if_unusable(guard: Guard, addressed: Iterable[str]) -> None:
    """Raise the evidence of the first server of ``addressed`` that could not be connected.

    Raises:
        MCPMuxError: the server's last error (``ServerExited``, ``AuthRequired``, ...), or
            :class:`ServerUnavailable` with its state and reason.
    """
    states = {s.name: s for s in guard.status()}
    for name in sorted(addressed):
        status = states.get(name)
        if status is None or status.state.value in _USABLE:
            continue
        error: MCPMuxError | None = guard.last_error(name)
        if error is not None:
            raise error.with_traceback(None)
        raise ServerUnavailable(name, f"{status.state.value}: {status.reason}")


def warn_unusable(guard: Guard, secrets: frozenset[str]) -> None:
    """One warning line on stderr per server that is failed, retrying or waiting for credentials."""
    for status in guard.status():
        state, reason = status.state.value, status.reason
        if state == "starting" and status.last_error is not None:
            # Already trying again after a failed first attempt: say what that attempt left it in.
            earlier = next((t for t in reversed(status.history) if t.state.value != "starting"), None)
            if earlier is not None:
                state, reason = earlier.state.value, earlier.reason
        if state not in _USABLE and state != "starting":
            reason = mask_secrets(reason, secrets)
            sys.stderr.write(f"warning: server {status.name!r} is {state}: {reason}\n")
