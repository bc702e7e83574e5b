"""``mcpmux test NAME``: connect to one server directly, ping it, list everything, report timings.

It bypasses the manager on purpose (through :func:`mcpmux.probe.probe`): a test reports what one
connection does, with no supervision, retries or catalog in between.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mcpmux.cli import render
from mcpmux.cli.completion import complete_servers
from mcpmux.cli.output import command_config, emit, err_console, json_option, redact_logs, state
from mcpmux.cli.running import run as run_to_end
from mcpmux.errors import MCPMuxError

if TYPE_CHECKING:
    pass

_T = TypeVar("_T")


def _run(body: Callable[[], Awaitable[_T]]) -> _T:
    """Run ``body`` on an event loop, masking configured secrets in any error it raises."""
    try:
        return run_to_end(body)
    except MCPMuxError as exc:
        exc.args = tuple(_redact(str(a)) for a in exc.args)
        raise


def _redact(text: str) -> str:
    from mcpmux.config.display import redact

    return redact(text, state().secrets)


@click.command("test")
@click.argument("name", shell_complete=complete_servers)
@json_option
def test_cmd(name: str) -> None:
    """Connect to server NAME, ping it, list everything it offers and report timings."""

    async def body() -> dict[str, Any]:
        from mcpmux.probe import probe

        config = command_config()
        state().secrets = config.secret_values
        redact_logs(config.secret_values)
        server = config.server(name)
        progress = err_console().status(f"connecting to {name} ({server.type})...") if sys.stderr.isatty() else None
        if progress is not None:
            progress.start()
        try:
            return render.test_report(await probe(server, config))
        finally:
            if progress is not None:
                progress.stop()

    report = _run(body)
    emit(report, lambda: render.print_test_report(report))
