"""The source registry on real SQLite and real PostgreSQL: sources, manifests, sealed secrets, tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import select

from mcpmux.config.models import Config, OpenAPIServerConfig, StdioServerConfig, StreamableHttpServerConfig
from mcpmux.errors import ConfigError, NotFound, ServerUnavailable, SourceError, SourceExists
from mcpmux.manager import Manager
from mcpmux.sources import SourceRegistry, SourceSpec, sync_source
from mcpmux.sources.schema import source_secrets, sources
from tests.peers.fixtures import stdio_command
from tests.sources.conftest import KEY

SECRET = "sk-live-0123456789abcdef"


def _manifest(command: str, args: list[str]) -> dict[str, Any]:
    """A registry ``server.json`` whose package runs ``command``: a required secret and an optional plain variable."""
    return {
        "name": "io.github.example/time-server",
        "description": "time",
        "packages": [
            {
                "registryType": "pypi",
                # `env COMMAND ARGS`: the pinned peer runs as the package's runner would run it.
                "identifier": command,
                "runtimeHint": "env",
                "packageArguments": [{"type": "positional", "value": a} for a in args],
                "environmentVariables": [
                    {"name": "TIME_API_KEY", "description": "the key", "isRequired": True, "isSecret": True},
                    {"name": "TIME_REGION", "isRequired": False, "default": "eu"},
                ],
            }
        ],
    }


def _time_manifest() -> dict[str, Any]:
    command, args = stdio_command("time")
    return _manifest(command, args)


def test_a_manifest_source_stores_its_secret_sealed_and_shows_it_masked(registry: SourceRegistry) -> None:
    source = registry.add(
        SourceSpec(name="time", source_type="mcp", manifest=_time_manifest(), environment={"TIME_API_KEY": SECRET})
    )
    assert source.environment() == {"TIME_API_KEY": "********", "TIME_REGION": "eu"}
    assert [(v.name, v.is_required, v.is_secret) for v in source.variables] == [
        ("TIME_API_KEY", True, True),
        ("TIME_REGION", False, False),
    ]
    assert SECRET not in json.dumps(source.to_json())
    assert source.entry["env"]["TIME_API_KEY"] == "${TIME_API_KEY}"
    with registry.engine.connect() as db:
        stored = json.dumps([list(map(str, row)) for row in db.execute(select(sources))])
        sealed = db.execute(select(source_secrets.c.sealed)).scalar_one()
    assert SECRET not in stored
    assert SECRET.encode() not in bytes(sealed)
    server = registry.server_config(source)
    assert isinstance(server, StdioServerConfig)
    assert server.env["TIME_API_KEY"].get_secret_value() == SECRET
    assert SECRET in server.secret_values


def test_a_missing_required_variable_registers_nothing(registry: SourceRegistry) -> None:
    with pytest.raises(SourceError, match=r"required variable.*TIME_API_KEY"):
        registry.add(SourceSpec(name="time", source_type="mcp", manifest=_time_manifest()))
    assert registry.all() == []


def test_a_plugin_directory_holding_server_json_is_a_source(registry: SourceRegistry, tmp_path: Path) -> None:
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "server.json").write_text(json.dumps(_time_manifest()))
    source = registry.add(
        SourceSpec(
            name="time", source_type="mcp", url=f"file://{tmp_path / 'plugin'}", environment={"TIME_API_KEY": "k"}
        )
    )
    assert source.entry["type"] == "stdio"


def test_names_are_unique_and_configured_servers_are_reserved(registry: SourceRegistry) -> None:
    spec = SourceSpec(name="remote", source_type="mcp", url="https://mcp.example.invalid/mcp")
    registry.add(spec)
    with pytest.raises(SourceExists):
        registry.add(spec)
    with pytest.raises(SourceExists, match="configuration"):
        registry.add(SourceSpec(name="mine", source_type="mcp", url="https://x.invalid/mcp"), reserved=["mine"])
    with pytest.raises(SourceError, match="name must match"):
        registry.add(SourceSpec(name="Bad Name", source_type="mcp", url="https://x.invalid/mcp"))
    assert [s.name for s in registry.all()] == ["remote"]


def test_update_and_remove(registry: SourceRegistry) -> None:
    added = registry.add(
        SourceSpec(name="time", source_type="mcp", manifest=_time_manifest(), environment={"TIME_API_KEY": "old-key"})
    )
    changed = registry.update("time", {"description": "new", "environment": {"TIME_API_KEY": "new-key"}})
    assert changed.description == "new"
    assert changed.updated_at >= added.updated_at
    server = registry.server_config(changed)
    assert isinstance(server, StdioServerConfig)
    assert server.env["TIME_API_KEY"].get_secret_value() == "new-key"
    with pytest.raises(SourceError, match="cannot change"):
        registry.update("time", {"name": "other"})
    registry.remove(added.id)
    with pytest.raises(NotFound, match="no source named 'time'"):
        registry.get("time")
    with registry.engine.connect() as db:
        assert db.execute(select(source_secrets)).all() == []


def test_an_openapi_source_seals_its_auth(registry: SourceRegistry, tmp_path: Path) -> None:
    spec_file = tmp_path / "api.json"
    spec_file.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {}}))
    config = {"base_url": "http://127.0.0.1:9", "auth": {"type": "bearer", "token": SECRET}}
    source = registry.add(SourceSpec(name="api", source_type="openapi", url=f"file://{spec_file}", config=config))
    assert source.entry["auth"] == {"type": "bearer", "token": "${AUTH_TOKEN}"}
    assert source.environment() == {"AUTH_TOKEN": "********"}
    server = registry.server_config(source)
    assert isinstance(server, OpenAPIServerConfig)
    assert server.auth is not None and server.auth.token is not None
    assert server.auth.token.get_secret_value() == SECRET


def test_a_changed_key_is_an_error_naming_the_secret(database_url: str) -> None:
    first = SourceRegistry(database_url, key=KEY)
    try:
        first.add(
            SourceSpec(name="time", source_type="mcp", manifest=_time_manifest(), environment={"TIME_API_KEY": "k1"})
        )
    finally:
        first.close()
    other = SourceRegistry(database_url, key=bytes(32))
    try:
        with pytest.raises(ConfigError, match=r"TIME_API_KEY.*does not open"):
            other.server_config(other.get("time"))
    finally:
        other.close()


def test_the_registry_survives_a_reopen(database_url: str) -> None:
    first = SourceRegistry(database_url, key=KEY)
    try:
        first.add(
            SourceSpec(name="time", source_type="mcp", manifest=_time_manifest(), environment={"TIME_API_KEY": "k"})
        )
        first.store_tools(
            "time", [{"name": "get_current_time", "description": "now", "input_schema": {"type": "object"}}]
        )
    finally:
        first.close()
    again = SourceRegistry(database_url, key=KEY)
    try:
        assert [s.name for s in again.all()] == ["time"]
        assert [t.tool_id for t in again.tools()] == ["time:get_current_time"]
    finally:
        again.close()


@pytest.mark.anyio
async def test_sync_stores_the_tools_and_registered_sources_run_with_the_configuration(
    registry: SourceRegistry,
) -> None:
    registry.add(
        SourceSpec(name="time", source_type="mcp", manifest=_time_manifest(), environment={"TIME_API_KEY": SECRET})
    )
    with anyio.fail_after(60):
        tools = await sync_source(registry, "time")
    assert {t.tool_id for t in tools} >= {"time:get_current_time", "time:convert_time"}
    assert all(t.execution_mode == "mcp_call" for t in tools)
    assert registry.get("time").synced_at is not None
    assert [t.name for t in registry.tools(search="convert")] == ["convert_time"]
    config = registry.with_sources(Config())
    assert SECRET in config.secret_values
    with anyio.fail_after(60):
        async with Manager(config, catalog=False) as manager:
            result = await manager.call_tool("time:get_current_time", {"timezone": "UTC"})
    assert not result.is_error


@pytest.mark.anyio
async def test_sync_of_a_source_that_cannot_start_changes_nothing(registry: SourceRegistry) -> None:
    registry.add(SourceSpec(name="ghost", source_type="mcp", config={"command": "not-installed-anywhere-mcp"}))
    with anyio.fail_after(60), pytest.raises(ServerUnavailable, match=r"not-installed-anywhere-mcp"):
        await sync_source(registry, "ghost")
    assert registry.tools(source="ghost") == []
    assert registry.get("ghost").synced_at is None


def test_literal_headers_and_env_of_a_config_entry_are_sealed(registry: SourceRegistry) -> None:
    config = {
        "type": "http",
        "url": "https://mcp.example.invalid/mcp",
        "headers": {"Authorization": f"Bearer {SECRET}"},
    }
    source = registry.add(SourceSpec(name="remote", source_type="mcp", config=config))
    assert source.entry["headers"] == {"Authorization": "${HEADER_AUTHORIZATION}"}
    assert SECRET not in json.dumps(source.to_json())
    server = registry.server_config(source)
    assert isinstance(server, StreamableHttpServerConfig)
    assert server.headers["Authorization"].get_secret_value() == f"Bearer {SECRET}"
    stdio = registry.add(
        SourceSpec(name="local", source_type="mcp", config={"command": "true", "env": {"TOKEN": SECRET}})
    )
    assert stdio.entry["env"] == {"TOKEN": "${TOKEN}"}
    assert stdio.environment() == {"TOKEN": "********"}
