"""Sync a source: start it alone, list its tools, store them in the registry."""

from __future__ import annotations

from mcpmux.config.models import Settings
from mcpmux.errors import ServerUnavailable
from mcpmux.manager import Manager
from mcpmux.sources.models import SourceTool
from mcpmux.sources.registry import SourceRegistry

__all__ = ["sync_source"]


async def sync_source(registry: SourceRegistry, key: str, settings: Settings | None = None) -> list[SourceTool]:
    """Connect the source ``key`` (id or name) on its own, store the tools it lists, return them.

    Raises:
        NotFound: no such source.
        ServerUnavailable: it could not be started or listed (the reason says why); nothing changes.
        ConfigError: a secret of it does not open.
    """
    source = registry.get(key)
    server = registry.server_config(source).model_copy(update={"lazy": False, "retry_attempts": 0})
    async with Manager([server], settings=settings or Settings(), catalog=False, start=True) as manager:
        status = next(s for s in manager.status() if s.name == server.name)
        if status.state != "connected":
            raise ServerUnavailable(server.name, status.reason or status.state)
        tools = [
            {
                "name": tool.tool,
                "description": tool.description,
                "input_schema": tool.input_schema,
                "annotations": tool.annotations,
            }
            for tool in manager.tools(server.name)
            if not tool.synthetic
        ]
    return registry.store_tools(source.id, tools)
