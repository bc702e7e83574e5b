"""mcpmux: an MCP host. Many Model Context Protocol servers in, one safe, namespaced tool surface out.

Public names are imported on first use (PEP 562), so ``import mcpmux`` and the CLI's ``--help``
stay fast; type checkers see ordinary imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AuthRequired": "mcpmux.errors",
    "CommandNotFound": "mcpmux.errors",
    "Config": "mcpmux.config",
    "ConfigError": "mcpmux.errors",
    "ConnectFailed": "mcpmux.errors",
    "MCPMuxError": "mcpmux.errors",
    "MCPTimeoutError": "mcpmux.errors",
    "ServerConfig": "mcpmux.config",
    "ServerError": "mcpmux.errors",
    "ServerExited": "mcpmux.errors",
    "Settings": "mcpmux.config",
    "ToolError": "mcpmux.errors",
    "TransportError": "mcpmux.errors",
    "load_config": "mcpmux.config",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from mcpmux.config import Config, ServerConfig, Settings, load_config
    from mcpmux.errors import (
        AuthRequired,
        CommandNotFound,
        ConfigError,
        ConnectFailed,
        MCPMuxError,
        MCPTimeoutError,
        ServerError,
        ServerExited,
        ToolError,
        TransportError,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpmux' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
