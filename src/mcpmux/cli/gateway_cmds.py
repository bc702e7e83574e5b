"""``mcpmux serve`` (the gateway) and ``mcpmux token`` (its bearer tokens)."""

from __future__ import annotations

import re
from datetime import datetime

import anyio
import click

from mcpmux.cli.output import command_state_store, emit, json_option, redact_logs, state, table
from mcpmux.config import load_config
from mcpmux.errors import NotFound, closest


def _separator(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,8}", value):
        raise click.BadParameter(f"{value!r}: MCP tool names allow only letters, digits, '_', '.' and '-'")
    return value


@click.command("serve")
@click.option("--stdio", is_flag=True, help="Serve MCP on stdin/stdout (the default when no other face is given).")
@click.option("--http", "http_addr", metavar="HOST:PORT", help="Streamable HTTP at /mcp (both protocol eras).")
@click.option("--sse", is_flag=True, help="With --http: also the legacy SSE transport at /sse.")
@click.option(
    "--json-response", is_flag=True, help="With --http: plain JSON answers (faster; no progress or relayed requests)."
)
@click.option("--tcp", "tcp_addr", metavar="HOST:PORT", help="Newline-delimited JSON-RPC over TCP (loopback only).")
@click.option("--tcp-without-tokens", is_flag=True, help="Serve --tcp even though tokens exist (it cannot check them).")
@click.option("--ws", "ws_addr", metavar="HOST:PORT", help="WebSocket (subprotocol mcp; same rules as --http).")
@click.option(
    "--separator", default="__", show_default=True, callback=lambda _c, _p, v: _separator(v),
    help="Joins server and tool in the names served ([A-Za-z0-9_.-]).",
)  # fmt: skip
@click.option("--auth", is_flag=True, help="Require a bearer token even on loopback.")
@click.option("--no-api", is_flag=True, help="With --http: do not serve the REST API at /api.")
@click.option("--no-ui", is_flag=True, help="With --http: do not serve the web console at /ui.")
@click.option(
    "--allow-process-sources", is_flag=True,
    help="With --http: let REST API callers register sources that start a process (as `mcpmux api`).",
)  # fmt: skip
@click.option("--db", "db_url", metavar="URL", envvar="MCPMUX_DB", help="The source registry (default: sources.db).")
@click.option("--allow-host", multiple=True, metavar="HOST[:PORT|:*]", help="Another accepted Host header.")
@click.option("--allow-origin", multiple=True, metavar="ORIGIN", help="Another accepted Origin header.")
@click.option("--max-body", type=click.IntRange(1024), default=4 * 1024 * 1024, show_default=True, help="Bytes.")
@click.option("--drain-timeout", type=click.FloatRange(0), default=10.0, show_default=True, help="Seconds.")
@click.option(
    "--header-timeout", type=click.FloatRange(0.1), default=10.0, show_default=True, help="Seconds for a request head."
)
@click.option("--oauth-issuer", metavar="URL", help="Also accept JWT access tokens of this authorization server.")
@click.option("--oauth-resource", metavar="URL", help="With --oauth-issuer: this gateway's URL (the token audience).")
@click.option(
    "--oauth-client-id",
    metavar="ID",
    help="Introspect opaque tokens (RFC 7662) as this client; its secret from $MCPMUX_OAUTH_CLIENT_SECRET.",
)
@click.option(
    "--oauth-introspection", metavar="URL", help="The introspection endpoint (default: the issuer's metadata says it)."
)
@click.option(
    "--oauth-introspection-ttl",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long an introspection answer is trusted (a revoked token: refused after).",
)
@click.option(
    "--oauth-groups-claim",
    default="groups",
    show_default=True,
    metavar="CLAIM",
    help="The claim listing the caller's groups (a dotted path for a nested one: realm_access.roles).",
)
@click.option(
    "--oauth-allow-private",
    is_flag=True,
    help="Allow an introspection endpoint on a private address other than the issuer's host.",
)
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="Serve only this configured agent, as the tool agents__ask_NAME (repeatable; no REST).")  # fmt: skip
@click.option("--toolset", metavar="NAME", help="Serve only this toolset of the config (`toolsets:`) on every face.")
@click.option("--expose", multiple=True, metavar="GLOB",
              help="Serve only the tools, prompts and resources matching GLOB (canonical names, e.g. 'fs:read_*'; "
                   "repeatable), on every face; no REST API or console.")  # fmt: skip
@click.option(
    "--replica-id", envvar="MCPMUX_REPLICA_ID", metavar="NAME",
    help="With --http and a PostgreSQL --db: serve as this replica of several (default: the host name).",
)  # fmt: skip
@click.option(
    "--advertise", envvar="MCPMUX_ADVERTISE", metavar="URL",
    help="With --replica-id: the URL the other replicas reach this one at (http://ADDR:PORT).",
)  # fmt: skip
def serve_cmd(
    stdio: bool,
    http_addr: str | None,
    sse: bool,
    json_response: bool,
    tcp_addr: str | None,
    tcp_without_tokens: bool,
    ws_addr: str | None,
    separator: str,
    auth: bool,
    no_api: bool,
    db_url: str | None,
    allow_host: tuple[str, ...],
    allow_origin: tuple[str, ...],
    max_body: int,
    drain_timeout: float,
    header_timeout: float,
    oauth_issuer: str | None = None,
    oauth_resource: str | None = None,
    oauth_client_id: str | None = None,
    oauth_introspection: str | None = None,
    oauth_introspection_ttl: float = 30.0,
    oauth_groups_claim: str = "groups",
    oauth_allow_private: bool = False,
    no_ui: bool = False,
    agents: tuple[str, ...] = (),
    toolset: str | None = None,
    replica_id: str | None = None,
    advertise: str | None = None,
    allow_process_sources: bool = False,
    expose: tuple[str, ...] = (),
) -> None:
    """Serve every configured server's tools, resources and prompts as one MCP server.

    With --http each toolset of the config is also served at /mcp/NAME (and /sse/NAME with --sse);
    --toolset NAME serves only that toolset, on every face; --expose GLOB (repeatable) only what the
    globs name, without defining a toolset.

    With --http the REST API is served beside /mcp at /api (its document at /api/openapi.json),
    under the same rules and tokens, unless --no-api; and the web console at /ui (sign in with a
    token, or with the console key printed at start while no token exists), unless --no-ui.

    HTTP binds 127.0.0.1 unless told otherwise and refuses any other address unless tokens exist
    (mcpmux token create NAME). Once a token exists every HTTP request and WebSocket handshake
    needs one (created or revoked while serving: effective at once). WebSocket clients send it as
    'Authorization: Bearer TOKEN', or from a browser as the subprotocol 'mcpmux.bearer.TOKEN'
    beside 'mcp'. Stops on SIGTERM or SIGINT: calls in flight get --drain-timeout seconds, then
    the upstream servers stop.

    With --replica-id (or --advertise) several gateways on one PostgreSQL (--db) serve together
    behind any load balancer, no sticky sessions needed: each request naming a session or a
    waiting call of another replica is forwarded to it over its --advertise URL.
    """
    from mcpmux.gateway.runtime import loop_options, quiet_sdk_tracing
    from mcpmux.serve.config import ServeConfig

    settings = ServeConfig(
        stdio=stdio, http=http_addr, sse=sse, json_response=json_response, tcp=tcp_addr,
        tcp_without_tokens=tcp_without_tokens, ws=ws_addr, separator=separator, auth=auth, api=not no_api,
        ui=not no_ui, allow_process_sources=allow_process_sources, db_url=db_url, allow_hosts=allow_host,
        allow_origins=allow_origin, max_body=max_body, drain_timeout_s=drain_timeout, header_timeout_s=header_timeout,
        oauth_issuer=oauth_issuer, oauth_resource=oauth_resource, oauth_client_id=oauth_client_id,
        oauth_introspection=oauth_introspection, oauth_introspection_ttl_s=oauth_introspection_ttl,
        oauth_groups_claim=oauth_groups_claim, oauth_allow_private=oauth_allow_private, agents=agents,
        toolset=toolset, expose=expose, replica_id=replica_id, advertise=advertise, config_path=state().config_path,
    )  # fmt: skip
    prepared = settings.prepare(redact=redact_logs)
    quiet_sdk_tracing()
    try:
        anyio.run(prepared.serve, backend_options=loop_options())
    finally:
        prepared.close()


@click.group("token")
def token() -> None:
    """Bearer tokens for ``mcpmux serve --http`` (stored hashed in the state database)."""


@token.command("create")
@click.argument("name")
@click.option(
    "--can-approve",
    is_flag=True,
    help="Its caller may answer approval questions, for its own calls only (others are refused, not asked).",
)
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    type=click.Choice(["read", "execute", "admin"]),
    help="What it may do on the REST API (repeatable; default: read and execute).",
)
@click.option(
    "--toolset",
    "toolsets",
    multiple=True,
    metavar="NAME",
    help="Bind it to this toolset (repeatable): it is accepted only at /mcp/NAME of its toolsets.",
)
@json_option
def token_create(name: str, can_approve: bool, scopes: tuple[str, ...], toolsets: tuple[str, ...] = ()) -> None:
    """Create a token called NAME and print it (it is shown only this once)."""
    from mcpmux.policy.toolsets import toolset_named
    from mcpmux.web.tokens import DEFAULT_API_SCOPES, TokenStore

    if toolsets:
        config = load_config(state().config_path)
        for toolset in toolsets:
            toolset_named(config, toolset)  # a typo would make a token that sees nothing
    chosen = scopes or DEFAULT_API_SCOPES
    with command_state_store() as store:
        secret = TokenStore(store).create(name, can_approve=can_approve, scopes=chosen, toolsets=toolsets)
    emit(
        {
            "name": name,
            "token": secret,
            "can_approve": can_approve,
            "scopes": sorted(chosen),
            "toolsets": sorted(set(toolsets)),
        },
        lambda: click.echo(secret),
    )
    click.echo(
        f"token {name!r}: shown only this once; a running 'mcpmux serve' accepts it from its next request "
        "(and from now on requires a token from every HTTP and WebSocket client)",
        err=True,
    )


@token.command("list")
@json_option
def token_list() -> None:
    """List the tokens (names and creation times; never the tokens)."""
    from mcpmux.web.tokens import TokenStore

    with command_state_store() as store:
        tokens = TokenStore(store).list()
    rows = [
        {
            "name": t.name,
            "created_at": datetime.fromtimestamp(t.created_at).isoformat(),
            "can_approve": t.can_approve,
            "toolsets": list(t.toolsets),
        }
        for t in tokens
    ]
    listed = [
        (t.name, r["created_at"], "yes" if t.can_approve else "no", ", ".join(t.toolsets) or "all")
        for t, r in zip(tokens, rows, strict=True)
    ]
    emit(rows, lambda: table(["name", "created", "can approve", "toolsets"], listed))


@token.command("revoke")
@click.argument("name")
@json_option
def token_revoke(name: str) -> None:
    """Revoke the token called NAME (a running 'mcpmux serve' refuses it from its next request)."""
    from mcpmux.web.tokens import TokenStore

    with command_state_store() as store:
        tokens = TokenStore(store)
        revoked = tokens.revoke(name)
        known = [t.name for t in tokens.list()]
    if not revoked:
        raise NotFound("token", name, closest(name, known), hint="`mcpmux token list` shows the tokens")
    emit({"name": name, "revoked": True}, lambda: click.echo(f"revoked {name}"))
