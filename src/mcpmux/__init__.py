"""mcpmux: an MCP host. Many Model Context Protocol servers in, one safe, namespaced tool surface out.

Public names are imported on first use (PEP 562), so ``import mcpmux`` and the CLI's ``--help``
stay fast; type checkers see ordinary imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AuthRequired": "mcpmux.errors",
    "Busy": "mcpmux.errors",
    "ClientCallbacks": "mcpmux.connection",
    "CommandNotFound": "mcpmux.errors",
    "Config": "mcpmux.config",
    "ConfigError": "mcpmux.errors",
    "ConnectFailed": "mcpmux.errors",
    "Connection": "mcpmux.connection",
    "MCPClient": "mcpmux.manager",
    "MCPManager": "mcpmux.manager",
    "MCPMuxError": "mcpmux.errors",
    "MCPTimeoutError": "mcpmux.errors",
    "Manager": "mcpmux.manager",
    "NameTable": "mcpmux.naming",
    "ServerConfig": "mcpmux.config",
    "ServerError": "mcpmux.errors",
    "ServerExited": "mcpmux.errors",
    "ServerState": "mcpmux.manager",
    "ServerStatus": "mcpmux.manager",
    "ServerUnavailable": "mcpmux.errors",
    "Settings": "mcpmux.config",
    "ToolBridge": "mcpmux.bridge",
    "ToolError": "mcpmux.errors",
    "ToolInfo": "mcpmux.manager",
    "ToolNotFound": "mcpmux.errors",
    "ToolResult": "mcpmux.connection",
    "TransportError": "mcpmux.errors",
    "load_config": "mcpmux.config",
}

__all__ = [
    "AuthRequired",
    "Busy",
    "ClientCallbacks",
    "CommandNotFound",
    "Config",
    "ConfigError",
    "ConnectFailed",
    "Connection",
    "MCPClient",
    "MCPManager",
    "MCPMuxError",
    "MCPTimeoutError",
    "Manager",
    "NameTable",
    "ServerConfig",
    "ServerError",
    "ServerExited",
    "ServerState",
    "ServerStatus",
    "ServerUnavailable",
    "Settings",
    "ToolBridge",
    "ToolError",
    "ToolInfo",
    "ToolNotFound",
    "ToolResult",
    "TransportError",
    "__version__",
    "load_config",
]

if TYPE_CHECKING:
    from mcpmux.bridge import (
        ToolBridge,
    )
    from mcpmux.config import (
        Config,
        ServerConfig,
        Settings,
        load_config,
    )
    from mcpmux.connection import (
        ClientCallbacks,
        Connection,
        ToolResult,
    )
    from mcpmux.errors import (
        AuthRequired,
        Busy,
        CommandNotFound,
        ConfigError,
        ConnectFailed,
        MCPMuxError,
        MCPTimeoutError,
        ServerError,
        ServerExited,
        ServerUnavailable,
        ToolError,
        ToolNotFound,
        TransportError,
    )
    from mcpmux.manager import (
        Manager,
        MCPClient,
        MCPManager,
        ServerState,
        ServerStatus,
        ToolInfo,
    )
    from mcpmux.naming import (
        NameTable,
    )

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
