"""``mcpmux login NAME``, ``mcpmux logout NAME`` and ``mcpmux auth status``: OAuth logins of HTTP servers.

The login runs the code flow of :mod:`mcpmux.auth.login` (or client credentials, from config) and
stores the result in the machine's token broker, which every mcpmux process then uses. Nothing
here prints a token or a client secret.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import click

from mcpmux.cli.completion import complete_servers
from mcpmux.cli.host_cmds import run
from mcpmux.cli.output import emit, err_console, json_option, table
from mcpmux.cli.running import run as run_to_end
from mcpmux.config import Config
from mcpmux.config.models import OAuthConfig, SseServerConfig, StreamableHttpServerConfig
from mcpmux.errors import UsageError

__all__ = ["auth_group", "login_cmd", "logout_cmd", "offer_login"]

HttpServer = StreamableHttpServerConfig | SseServerConfig


def _http_server(config: Config, name: str) -> HttpServer:
    server = config.server(name)
    if not isinstance(server, StreamableHttpServerConfig | SseServerConfig):
        raise UsageError(
            f"server {name!r} is of type {server.type!r}: OAuth logins are for http and sse servers",
            hint="stdio servers take credentials from their `env`",
        )
    return server


async def _read_pasted_url() -> str:
    err_console().print("After signing in, paste the address your browser ended on (it may show an error page):")
    line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
    return str(line)


@click.command("login")
@click.argument("name", shell_complete=complete_servers)
@click.option(
    "--no-browser",
    is_flag=True,
    help="Print the URL instead of opening a browser, and accept the final address pasted back (headless machines).",
)
@click.option("--scope", "scopes", multiple=True, metavar="SCOPE", help="Ask for this scope (repeatable).")
@json_option
def login_cmd(name: str, no_browser: bool, scopes: tuple[str, ...]) -> None:
    """Log in to server NAME with OAuth 2.1; every mcpmux process of this machine then uses the login."""

    async def body(config: Config) -> dict[str, Any]:
        from mcpmux.auth.login import login, open_browser
        from mcpmux.auth.vault import open_vault

        server = _http_server(config, name)
        if scopes:
            auth = (server.auth or OAuthConfig()).model_copy(update={"scopes": scopes})
            server = server.model_copy(update={"auth": auth})

        async def show(url: str) -> None:
            err_console().print(f"To log in to {name}, open:\n{url}", soft_wrap=True, highlight=False)
            if not no_browser:
                await open_browser(url)

        record = await login(server, open_vault(), browser=show, paste=_read_pasted_url if no_browser else None)
        return record.describe()

    data = run(body)
    emit(data, lambda: click.echo(f"Logged in to {name} ({_scopes(data)}; {_expiry(data)})."))


def offer_login(entry: dict[str, Any]) -> None:
    """After ``mcpmux add NAME -t http URL``: if the server asks for OAuth, say so and offer the login.

    In a terminal the login is offered at once; elsewhere (scripts, ``--json``) the hint is printed on
    stderr. A server that does not answer is left alone: it may not be running yet.
    """
    headers = entry.get("headers") or {}
    if entry.get("type") != "http" or any(str(key).lower() == "authorization" for key in headers):
        return
    from mcpmux.auth.detect import asks_for_oauth

    name, url = str(entry["name"]), str(entry["url"])
    plain = {str(key): str(value) for key, value in headers.items()}
    if not run_to_end(asks_for_oauth, url, plain):
        return
    console = err_console()
    console.print(f"Server {name!r} asks for an OAuth login: run `mcpmux login {name}`.", highlight=False)
    if sys.stdin.isatty() and sys.stderr.isatty() and click.confirm("Log in now?", default=True, err=True):
        click.get_current_context().invoke(login_cmd, name=name, no_browser=False, scopes=())


@click.command("logout")
@click.argument("name", shell_complete=complete_servers)
@json_option
def logout_cmd(name: str) -> None:
    """Forget the OAuth login of server NAME on this machine (tokens and client registration)."""
    from mcpmux.auth.vault import open_vault

    removed = open_vault().delete(name)
    emit({"server": name, "removed": removed}, lambda: click.echo(_logout_text(name, removed)))


def _logout_text(name: str, removed: bool) -> str:
    return f"Logged out of {name}." if removed else f"No login stored for {name}."


@click.group("auth")
def auth_group() -> None:
    """OAuth logins of HTTP servers."""


@auth_group.command("status")
@json_option
def status_cmd() -> None:
    """Per server: how it authenticates, scopes, expiry; never a token."""

    async def body(config: Config) -> list[dict[str, Any]]:
        from mcpmux.auth.vault import open_vault

        vault = open_vault()
        rows: list[dict[str, Any]] = []
        names = [s.name for s in config.servers if isinstance(s, StreamableHttpServerConfig | SseServerConfig)]
        for name in dict.fromkeys([*names, *vault.servers()]):
            record = await anyio.to_thread.run_sync(vault.load, name)
            row = record.describe() if record is not None else {"server": name, "logged_in": False}
            row["store"] = vault.kind
            rows.append(row)
        return rows

    rows = run(body)
    emit(rows, lambda: _print_status(rows))


def _print_status(rows: list[dict[str, Any]]) -> None:
    table(
        ["server", "method", "logged in", "scopes", "expires", "store"],
        [
            (r["server"], r.get("method", "-"), "yes" if r["logged_in"] else "no", _scopes(r), _expiry(r), r["store"])
            for r in rows
        ],
    )


def _scopes(data: dict[str, Any]) -> str:
    scopes = data.get("scopes") or []
    return " ".join(scopes) if scopes else "no scopes"


def _expiry(data: dict[str, Any]) -> str:
    expires = data.get("expires_at")
    if expires is None:
        return "no expiry" if data.get("logged_in") else "-"
    left = expires - time.time()
    if left <= 0:
        return "expired, refreshed on use" if data.get("refreshable") else "expired"
    return f"expires in {int(left // 60)} min {int(left % 60)} s"
