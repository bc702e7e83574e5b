"""``mcpmux sources list|add|sync|remove``: the source registry from the command line.

The registry is ``<data dir>/sources.db`` unless ``--db URL`` (or ``MCPMUX_DB``) names another
database (``postgresql+psycopg://...``). Registered sources are used by every command like
configured servers; secrets given with ``-e`` are sealed and shown masked.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from mcpmux.cli.output import emit, json_option, state, table
from mcpmux.cli.running import run as run_to_end

if TYPE_CHECKING:
    from mcpmux.sources import SourceRegistry

__all__ = ["sources"]

_DB = click.option(
    "--db",
    "db_url",
    metavar="URL",
    envvar="MCPMUX_DB",
    help="The registry database (default: the data dir's sources.db).",
)


@click.group("sources")
def sources() -> None:
    """Register MCP servers and OpenAPI services in the source registry; sync and remove them."""


@sources.command("list")
@_DB
@json_option
def sources_list(db_url: str | None) -> None:
    """List the registered sources (secrets masked)."""

    registry = _registry(db_url)
    try:
        found = registry.all()
    finally:
        registry.close()

    def render() -> None:
        if not found:
            click.echo("no registered sources")
            return
        rows = [
            (s.name, s.source_type, s.url or s.entry.get("type", ""), s.lifecycle, _synced(s.synced_at)) for s in found
        ]
        table(["name", "type", "where", "lifecycle", "synced"], rows)

    emit([s.to_json() for s in found], render)


@sources.command("add")
@click.argument("name")
@click.option("--openapi", "spec", metavar="SPEC", help="An OpenAPI document: a path or an http(s) URL.")
@click.option("--base-url", help="Where the OpenAPI source's requests go (default: the document's server).")
@click.option(
    "--manifest", metavar="SERVER_JSON", help="An MCP registry server.json (file, or a directory holding one)."
)
@click.option("--url", help="A remote MCP server (Streamable HTTP).")
@click.option("--config-json", metavar="JSON", help='Server fields as JSON ({"command": ..., "args": [...]}).')
@click.option("-e", "--env", "environment", multiple=True, metavar="KEY=VALUE", help="A variable's value (repeatable).")
@click.option("--description", default="", help="Free text.")
@click.option("--transient", is_flag=True, help="Start the source only when one of its tools is called.")
@_DB
@json_option
def sources_add(
    name: str,
    spec: str | None,
    base_url: str | None,
    manifest: str | None,
    url: str | None,
    config_json: str | None,
    environment: tuple[str, ...],
    description: str,
    transient: bool,
    db_url: str | None,
) -> None:
    """Register NAME: an OpenAPI document (--openapi), a server.json (--manifest), a remote MCP URL
    (--url) or server fields (--config-json)."""
    from pathlib import Path

    from mcpmux.config import load_config
    from mcpmux.sources import SourceRegistry, SourceSpec
    from mcpmux.sources.models import Lifecycle

    chosen = [x for x in (spec, manifest, url, config_json) if x]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --openapi, --manifest, --url, --config-json")
    values = dict(_pair(item) for item in environment)
    fields: dict[str, Any] = {}
    if spec:
        location = spec if "://" in spec else f"file://{Path(spec).resolve()}"
        fields = {"source_type": "openapi", "url": location, "config": {"base_url": base_url} if base_url else {}}
    elif manifest:
        fields = {"source_type": "mcp", "url": f"file://{Path(manifest).resolve()}"}
    elif url:
        fields = {"source_type": "mcp", "url": url}
    else:
        fields = {"source_type": "mcp", "config": _json_object(config_json or "")}
    lifecycle: Lifecycle = "transient" if transient else "singleton"
    source_spec = SourceSpec(name=name, description=description, environment=values, lifecycle=lifecycle, **fields)
    config = load_config(state().config_path)
    reserved = [s.name for s in config.servers]
    registry = SourceRegistry.configured(config, db_url)
    try:
        added = registry.add(source_spec, reserved=reserved)
    finally:
        registry.close()
    emit(added.to_json(), lambda: click.echo(f"registered {added.name} ({added.source_type}, id {added.id})"))


@sources.command("sync")
@click.argument("name")
@_DB
@json_option
def sources_sync(name: str, db_url: str | None) -> None:
    """Start NAME on its own, list its tools and store them."""
    from mcpmux.sources import sync_source

    registry = _registry(db_url)
    try:
        tools = run_to_end(sync_source, registry, name)
    finally:
        registry.close()
    answer = {"tools_discovered": len(tools), "tools": [t.to_json() for t in tools]}

    def render() -> None:
        click.echo(f"{name}: {len(tools)} tools")
        table(
            ["tool", "mode", "description"],
            [(t.tool_id, t.execution_mode, t.description.split("\n")[0][:80]) for t in tools],
        )

    emit(answer, render)


@sources.command("remove")
@click.argument("name")
@_DB
@json_option
def sources_remove(name: str, db_url: str | None) -> None:
    """Unregister NAME (its secrets and tools go with it)."""

    registry = _registry(db_url)
    try:
        removed = registry.remove(name)
    finally:
        registry.close()
    emit({"removed": removed.name, "id": removed.id}, lambda: click.echo(f"removed {removed.name}"))


def _registry(db_url: str | None) -> SourceRegistry:
    """The registry: ``--db``, else ``MCPMUX_DB``, else the config's ``storage.url``, else ``sources.db``."""
    from mcpmux.config import load_config
    from mcpmux.sources import SourceRegistry

    return SourceRegistry.configured(load_config(state().config_path), db_url)


def _pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise click.UsageError(f"-e wants KEY=VALUE, got {item!r}")
    return key, value


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise click.UsageError(f"--config-json is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise click.UsageError("--config-json must be a JSON object")
    return value


def _synced(when: Any) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if when is not None else "never"
