"""One live MCP server: session, protocol era, deadlines, callbacks and error mapping.

Names load on first use (see ``mcpmux._lazy``): importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.connection._requests import (
        MAX_PAGES,
    )
    from mcpmux.connection.callbacks import (
        ClientCallbacks,
        ElicitationCallback,
        ListChangedCallback,
        ListKind,
        LogCallback,
        ProgressCallback,
        ResourceUpdatedCallback,
        RootsCallback,
        SamplingCallback,
    )
    from mcpmux.connection.connection import (
        CLIENT_INFO,
        Connection,
        TransportFactory,
    )
    from mcpmux.connection.info import (
        ConnectionInfo,
    )
    from mcpmux.connection.results import (
        ToolResult,
        raise_for_tool_error,
    )

__all__ = [
    "CLIENT_INFO",
    "MAX_PAGES",
    "ClientCallbacks",
    "Connection",
    "ConnectionInfo",
    "ElicitationCallback",
    "ListChangedCallback",
    "ListKind",
    "LogCallback",
    "ProgressCallback",
    "ResourceUpdatedCallback",
    "RootsCallback",
    "SamplingCallback",
    "ToolResult",
    "TransportFactory",
    "raise_for_tool_error",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CLIENT_INFO": "mcpmux.connection.connection",
        "MAX_PAGES": "mcpmux.connection._requests",
        "ClientCallbacks": "mcpmux.connection.callbacks",
        "Connection": "mcpmux.connection.connection",
        "ConnectionInfo": "mcpmux.connection.info",
        "ElicitationCallback": "mcpmux.connection.callbacks",
        "ListChangedCallback": "mcpmux.connection.callbacks",
        "ListKind": "mcpmux.connection.callbacks",
        "LogCallback": "mcpmux.connection.callbacks",
        "ProgressCallback": "mcpmux.connection.callbacks",
        "ResourceUpdatedCallback": "mcpmux.connection.callbacks",
        "RootsCallback": "mcpmux.connection.callbacks",
        "SamplingCallback": "mcpmux.connection.callbacks",
        "ToolResult": "mcpmux.connection.results",
        "TransportFactory": "mcpmux.connection.connection",
        "raise_for_tool_error": "mcpmux.connection.results",
    },
)
