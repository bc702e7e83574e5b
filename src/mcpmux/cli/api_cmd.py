"""``mcpmux api``: the REST API on its own (sources, tools, execute, servers, audit)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import click

from mcpmux.cli.output import redact_logs, state

__all__ = ["api_cmd"]

_READY_POLL_S = 0.05


@click.command("api")
@click.option("--http", "http_addr", default="127.0.0.1:8766", show_default=True, metavar="HOST:PORT")
@click.option(
    "--db",
    "db_url",
    metavar="URL",
    envvar="MCPMUX_DB",
    help="The source registry (default: the data dir's sources.db).",
)
@click.option("--allow-process-sources", is_flag=True, help="Let API callers register sources that start a process.")
@click.option("--ssl-certfile", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS with this certificate.")
@click.option("--ssl-keyfile", type=click.Path(exists=True, dir_okay=False), help="The certificate's key.")
@click.option("--insecure-http", is_flag=True, help="Accept tokens over plain HTTP off loopback.")
@click.option("--allow-host", multiple=True, metavar="HOST[:PORT|:*]", help="Another accepted Host header.")
@click.option("--allow-origin", multiple=True, metavar="ORIGIN", help="Another accepted Origin.")
@click.option("--no-ui", is_flag=True, help="Do not serve the web console at /ui.")
def api_cmd(
    http_addr: str,
    db_url: str | None,
    allow_process_sources: bool,
    ssl_certfile: str | None,
    ssl_keyfile: str | None,
    insecure_http: bool,
    allow_host: tuple[str, ...],
    allow_origin: tuple[str, ...],
    no_ui: bool = False,
) -> None:
    """Serve the REST API (/api/*, its document at /api/openapi.json, docs at /api/docs).

    Binds 127.0.0.1 by default. Another address needs a token (mcpmux token create NAME --scope ...)
    and TLS (--ssl-certfile/--ssl-keyfile) or --insecure-http. The web console is served at /ui
    unless --no-ui (sign in with a token, or with the console key printed at start while no token
    exists).
    """
    import uvicorn

    from mcpmux.api.serve import build_api
    from mcpmux.config import load_config
    from mcpmux.policy import StateStore
    from mcpmux.serve.run import http_security
    from mcpmux.sources.registry import SourceRegistry
    from mcpmux.web.security import is_loopback
    from mcpmux.web.tokens import TokenStore

    host, _, port_text = http_addr.rpartition(":")
    if not host or not port_text.isdigit():
        raise click.UsageError(f"--http wants HOST:PORT, got {http_addr!r}")
    if not is_loopback(host) and not (ssl_certfile or insecure_http):
        raise click.UsageError("off loopback the API needs TLS (--ssl-certfile, --ssl-keyfile) or --insecure-http")
    config = load_config(state().config_path)
    registry = SourceRegistry.configured(config, db_url)
    redact_logs(config.secret_values)
    store = StateStore.configured(config, db_url)
    security = http_security(
        host, TokenStore(store), require_auth=not is_loopback(host), allow_hosts=allow_host,
        allow_origins=allow_origin, max_body_bytes=4 * 1024 * 1024, option="--http",
    )  # fmt: skip
    pending = None if no_ui else _pending(config)
    console = None if no_ui else _console(security, config, pending)
    app = build_api(
        config, registry, store=store, security=security, allow_process_sources=allow_process_sources,
        console=console, approver=pending,
    )  # fmt: skip
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=int(port_text),
            log_level="warning",
            lifespan="on",
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
        )
    )
    scheme = "https" if ssl_certfile else "http"

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(_READY_POLL_S)
            bound = server.servers[0].sockets[0].getsockname()[1]
            print(f"mcpmux: serving {scheme}://{host}:{bound}/api", file=sys.stderr, flush=True)

    try:
        anyio.run(run)
    finally:
        registry.close()
        store.close()


def _pending(config: Any) -> Any:
    """The queue where calls that need approval wait for a person at the console (``gateway_approvers.console``).

    REST callers' calls wait there as the gateway's do, and the console's own; ``None`` refuses them.
    """
    from mcpmux.policy.pending import PendingApprovals

    approvers = config.security.gateway_approvers
    return PendingApprovals(approvers.console_timeout_s, config.secret_values) if approvers.console else None


def _console(security: Any, config: Any, pending: Any) -> Any:
    """The console over the API's runtime; prints the console key while no token exists."""
    import secrets

    from mcpmux.console import build_console

    key = secrets.token_urlsafe(24)
    if not (security.tokens is not None and security.tokens.any()) and not security.require_token:
        click.echo(f"mcpmux: console at /ui; no token exists, sign in with the console key {key}", err=True)

    def factory(runtime_of: Any, rules: Any) -> Any:
        return build_console(lambda: runtime_of().guard, rules, key=key, sources=runtime_of, pending=pending)

    return factory
