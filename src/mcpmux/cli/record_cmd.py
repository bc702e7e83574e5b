"""``mcpmux record NAME -o session.jsonl``: capture a real server's session for replay in tests."""

from __future__ import annotations

from pathlib import Path

import anyio
import click

from mcpmux.cli.output import redact_logs, state
from mcpmux.config import load_config
from mcpmux.errors import ServerNotConfigured


@click.command("record")
@click.argument("name")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The JSON lines file."
)
@click.option("--http", "http_addr", metavar="HOST:PORT", help="Serve Streamable HTTP at /mcp instead of stdio.")
def record_cmd(name: str, output: Path, http_addr: str | None) -> None:
    """Serve server NAME through the gateway and record its session to a file.

    Any MCP client (an agent, the Inspector, a test) drives the session through the gateway, on
    stdio or with --http; every request the server answers is written to OUTPUT as it happens,
    in the server's own names, with secrets redacted. Stop with Ctrl-C (or the end of stdin).
    Replay it offline: MockServer.replay("OUTPUT") in mcpmux.testing.
    """
    from mcpmux.gateway.http import HttpOptions
    from mcpmux.gateway.runtime import quiet_sdk_tracing
    from mcpmux.policy import StateStore
    from mcpmux.serve.config import address
    from mcpmux.serve.run import ServeOptions, serve
    from mcpmux.testing.recording import Recorder

    config = load_config(state().config_path)
    redact_logs(config.secret_values)
    server = next((s for s in config.servers if s.name == name), None)
    if server is None:
        raise ServerNotConfigured(name, [s.name for s in config.servers])
    recorder = Recorder(output, server)
    only = config.model_copy(update={"servers": (server,)})
    http = None
    if http_addr is not None:
        host, port = address("--http", http_addr)
        http = HttpOptions(host=host, port=port)
    options = ServeOptions(stdio=http is None, http=http)
    quiet_sdk_tracing()
    store = StateStore.configured(config)
    try:
        anyio.run(lambda: serve(only, options, store=store, connection_factory=recorder.connection_factory))
    finally:
        store.close()
        click.echo(f"recorded {recorder.exchanges} exchanges of {name!r} to {output}", err=True)
