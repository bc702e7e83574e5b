"""The source registry: MCP servers and OpenAPI services registered at run time, on SQL storage.

A *source* is a server entry (any type mcpmux runs, or an MCP registry ``server.json``) or an
OpenAPI document, stored with its declared variables (required ones checked, secret ones sealed at
rest) and, after a sync, its tools. :func:`with_registered` adds every registered source to a
configuration, so each face (CLI, chat, gateway, REST API) uses them like configured servers.

The names are imported on first use: a command that never touches the registry never imports
SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpmux.sources.merge import registry_exists, with_registered
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
    "registry_exists",
    "sync_source",
    "with_registered",
]

_LAZY = {
    "ExecutionMode": "mcpmux.sources.models",
    "Lifecycle": "mcpmux.sources.models",
    "Source": "mcpmux.sources.models",
    "SourceSpec": "mcpmux.sources.models",
    "SourceTool": "mcpmux.sources.models",
    "SourceType": "mcpmux.sources.models",
    "Variable": "mcpmux.sources.models",
    "SourceRegistry": "mcpmux.sources.registry",
    "sync_source": "mcpmux.sources.sync",
    "registry_exists": "mcpmux.sources.merge",
    "with_registered": "mcpmux.sources.merge",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpmux.sources' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
