"""One live MCP server: session, protocol era, deadlines, callbacks and error mapping."""

from mcpmux.connection._requests import MAX_PAGES
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
from mcpmux.connection.connection import CLIENT_INFO, Connection, TransportFactory
from mcpmux.connection.info import ConnectionInfo
from mcpmux.connection.results import ToolResult, raise_for_tool_error

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
