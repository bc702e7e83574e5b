"""The source registry: MCP servers and OpenAPI services registered at run time, on SQL storage.

A *source* is a server entry (any type mcpmux runs, or an MCP registry ``server.json``) or an
OpenAPI document, stored with its declared variables (required ones checked, secret ones sealed at
rest) and, after a sync, its tools. ``SourceRegistry.with_sources(config)`` adds every registered
source to a configuration, so each face (CLI, chat, gateway, REST API) uses them like configured
servers.
"""

from __future__ import annotations

from mcpmux.sources.models import ExecutionMode, Lifecycle, Source, SourceSpec, SourceTool, SourceType, Variable
from mcpmux.sources.registry import SourceRegistry
from mcpmux.sources.sync import sync_source

__all__ = [
    "ExecutionMode",
    "Lifecycle",
    "Source",
    "SourceRegistry",
    "SourceSpec",
    "SourceTool",
    "SourceType",
    "Variable",
    "sync_source",
]
