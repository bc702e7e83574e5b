"""``mcpmux daemon start|stop|status|restart|run`` and ``mcpmux connect [SERVER|--all]``.

The daemon keeps stdio servers warm for every command, chat and host of this user (docs/daemon.md).
``connect`` is the stdio shim another host (Claude Desktop or Code, Cursor, VS Code) runs instead
of the server itself: it attaches to the daemon and passes bytes through, so every session of that
host shares one warm, guarded instance.
"""

from __future__ import annotations

import logging
import sys
import time

import anyio
import click

from mcpmux.cli.output import command_config, emit, json_option, state, table
from mcpmux.cli.running import run as run_to_end
from mcpmux.errors import EXIT_UNREACHABLE, DaemonUnavailable
from mcpmux.types.json_shapes import JSONObject

__all__ = ["connect_cmd", "daemon"]

logger = logging.getLogger(__name__)

STOP_WAIT_S = 20.0
_LINGER = click.option(
    "--linger",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Stop after this long with no client and no server (default 60).",
)


@click.group("daemon")
def daemon() -> None:
    """The per-user daemon that keeps stdio servers warm for every command, chat and host."""


@daemon.command("run")
@_LINGER
def run_cmd(linger: float | None) -> None:
    """Serve in the foreground (what `daemon start` runs in the background)."""
    import os

    from mcpmux.daemon.service import DEFAULT_LINGER_S, DaemonOptions, guardian_command, serve_daemon

    argv = [sys.executable, "-m", "mcpmux", *(["-v"] * state().verbosity), "daemon", "run"]
    argv += [] if linger is None else ["--linger", f"{linger:g}"]
    guarded = guardian_command(argv)
    if guarded is not None:
        # This process becomes the guardian (same pid, same parent) and the daemon its child.
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(guarded[0], guarded)

    def announce(line: str) -> None:
        sys.stderr.write(f"mcpmux daemon: {line}\n")
        sys.stderr.flush()

    if not logging.getLogger().handlers or state().verbosity == 0:
        logging.getLogger("mcpmux").setLevel(logging.INFO)
    options = DaemonOptions(linger_s=DEFAULT_LINGER_S if linger is None else linger)
    anyio.run(serve_daemon, options, announce)


@daemon.command("start")
@_LINGER
@json_option
def start_cmd(linger: float | None) -> None:
    """Start the daemon in the background unless one runs; print its pid and socket."""
    from mcpmux.attach.client import start_daemon

    status = run_to_end(start_daemon, linger)
    emit(status, lambda: click.echo(f"mcpmux daemon running (pid {status['pid']}) on {status['socket']}"))


@daemon.command("stop")
@json_option
def stop_cmd() -> None:
    """Stop the daemon (its servers are stopped and reaped first)."""
    result = _stop()
    emit(result, lambda: click.echo(_stopped_line(result)))


@daemon.command("restart")
@_LINGER
@json_option
def restart_cmd(linger: float | None) -> None:
    """Stop the daemon if it runs, then start a fresh one."""
    from mcpmux.attach.client import start_daemon

    _stop()
    status = run_to_end(start_daemon, linger)
    emit(status, lambda: click.echo(f"mcpmux daemon restarted (pid {status['pid']}) on {status['socket']}"))


@daemon.command("status")
@json_option
@click.pass_context
def status_cmd(ctx: click.Context) -> None:
    """The daemon's pid, clients and warm servers (exit 3 when it is not running)."""
    from mcpmux.attach.attach import STATUS
    from mcpmux.attach.client import request

    try:
        status = run_to_end(request, STATUS)
    except DaemonUnavailable as exc:
        reason = exc.reason
        emit({"running": False, "reason": reason}, lambda: click.echo(f"mcpmux daemon: not running ({reason})"))
        ctx.exit(EXIT_UNREACHABLE)
    emit({"running": True, **status}, lambda: _print_status(status))


def _print_status(status: JSONObject) -> None:
    click.echo(f"mcpmux daemon: pid {status['pid']} on {status['socket']}, up {status['uptime_s']} s")
    servers = status.get("servers") or []
    if not servers:
        click.echo("no server running")
        return
    columns = ["server", "share", "state", "pid", "clients", "idle s", "origin"]
    keys = ["server", "share", "state", "pid", "clients", "idle_s", "origin"]
    table(columns, [[s.get(k) for k in keys] for s in servers])


def _stop() -> JSONObject:
    from mcpmux.attach.attach import STOP
    from mcpmux.attach.client import request
    from mcpmux.attach.paths import lock_path
    from mcpmux.daemon.service import already_serving

    try:
        result = run_to_end(request, STOP)
    except DaemonUnavailable as exc:
        return {"stopped": False, "reason": exc.reason}
    deadline = time.monotonic() + STOP_WAIT_S
    while already_serving(lock_path()) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if already_serving(lock_path()) is not None:
        raise DaemonUnavailable(lock_path(), f"pid {result.get('pid')} did not stop within {STOP_WAIT_S:g} s")
    return {"stopped": True, "pid": result.get("pid")}


def _stopped_line(result: JSONObject) -> str:
    if result.get("stopped"):
        return f"mcpmux daemon stopped (pid {result['pid']})"
    return f"mcpmux daemon: not running ({result.get('reason')})"


@click.command("connect")
@click.argument("server", required=False)
@click.option("--all", "every", is_flag=True, help="Every configured server, as one MCP server (like `serve --stdio`).")
def connect_cmd(server: str | None, every: bool) -> int:
    """A stdio MCP server that is SERVER (or --all) served warm by the daemon, for other hosts' configs."""
    if (server is None) == (not every):
        raise click.UsageError("give one SERVER or --all")
    from mcpmux.daemon.shim import connect

    config = command_config()
    return connect(config, None if every else config.server(server or ""), state().daemon)
