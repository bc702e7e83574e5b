"""mcpmux: an MCP host. Many Model Context Protocol servers in, one safe, namespaced tool surface out.

Public names are imported on first use (PEP 562), so ``import mcpmux`` and the CLI's ``--help``
stay fast; type checkers see ordinary imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux import _moved
from mcpmux._lazy import lazy_exports
from mcpmux._version import __version__ as __version__

if TYPE_CHECKING:
    from mcpmux.bridge import (
        ToolBridge as ToolBridge,
    )
    from mcpmux.config import (
        Config as Config,
        ServerConfig as ServerConfig,
        Settings as Settings,
        TransportType as TransportType,
        load_config as load_config,
    )
    from mcpmux.connection import (
        ClientCallbacks as ClientCallbacks,
        Connection as Connection,
        ToolResult as ToolResult,
    )
    from mcpmux.errors import (
        ApprovalDenied as ApprovalDenied,
        AuthRequired as AuthRequired,
        Busy as Busy,
        CommandNotFound as CommandNotFound,
        ConfigError as ConfigError,
        ConnectFailed as ConnectFailed,
        InvalidArguments as InvalidArguments,
        MCPMuxError as MCPMuxError,
        MCPTimeoutError as MCPTimeoutError,
        ServerError as ServerError,
        ServerExited as ServerExited,
        ServerUnavailable as ServerUnavailable,
        ToolDefinitionChanged as ToolDefinitionChanged,
        ToolDenied as ToolDenied,
        ToolError as ToolError,
        ToolNotFound as ToolNotFound,
        ToolQuarantined as ToolQuarantined,
        TransportError as TransportError,
    )
    from mcpmux.host import (
        Host as Host,
    )
    from mcpmux.manager import (
        Manager as Manager,
        MCPClient as MCPClient,
        MCPManager as MCPManager,
        ServerState as ServerState,
        ServerStatus as ServerStatus,
        ToolInfo as ToolInfo,
    )
    from mcpmux.policy import (
        Guard as Guard,
        StateStore as StateStore,
    )
    from mcpmux.provider_names import (
        NameTable as NameTable,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__, also=("__version__",))
_moved.install()  # old module paths (before issue 38's moves) still import, with a DeprecationWarning
