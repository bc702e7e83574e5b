"""How the built-in servers use the SDK's ``MCPServer``: tools from docstrings, no logging set-up."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

__all__ = ["new_server", "tool", "tools_markdown"]

SERVER_VERSION = "0.1.0"

Lifespan = Callable[[MCPServer[Any]], AbstractAsyncContextManager[Any]]
F = TypeVar("F", bound=Callable[..., Any])


def tool(server: MCPServer[Any], annotations: ToolAnnotations) -> Callable[[F], F]:
    """Register the decorated function as a tool of ``server``, described by its cleaned docstring.

    The SDK takes docstrings verbatim (indentation included) and, for a ``str`` return, adds an
    output schema and a structured copy of the text; tools here return text only, once.
    """

    def register(fn: F) -> F:
        server.add_tool(fn, description=inspect.getdoc(fn), annotations=annotations, structured_output=False)
        return fn

    return register


def new_server(name: str, instructions: str, lifespan: Lifespan | None = None) -> MCPServer[Any]:
    """An :class:`MCPServer` that leaves the process's logging configuration as it found it.

    ``MCPServer.__init__`` calls ``logging.basicConfig`` (a rich handler on the root logger) when
    the root has no handler yet; a library must not configure logging (STYLE 11), so that handler
    and level are taken back off.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server: MCPServer[Any] = MCPServer(
        name, instructions=instructions, version=SERVER_VERSION, lifespan=lifespan, log_level="WARNING"
    )
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    return server


async def tools_markdown(server: MCPServer[Any]) -> str:
    """A markdown section listing the server's tools with the first line of each description."""
    lines = ["## tools", ""]
    for tool in await server.list_tools():
        summary = (tool.description or "").strip().splitlines()[0] if tool.description else ""
        hints = tool.annotations
        tag = ""
        if hints is not None and hints.read_only_hint:
            tag = " (read-only)"
        elif hints is not None and hints.destructive_hint:
            tag = " (destructive)"
        lines.append(f"- `{tool.name}`{tag}: {summary}")
    return "\n".join(lines) + "\n"
