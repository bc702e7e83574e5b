"""Helpers for driving a built-in server's tools through an MCP ``ClientSession``."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession


def text_of(result: types.CallToolResult) -> str:
    """The concatenated text blocks of a tool result."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def call_ok(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call ``tool`` and return its text, failing the test on a tool error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def call_error(session: ClientSession, tool: str, **arguments: Any) -> str:
    """Call ``tool``, assert it reports a tool error, and return the message."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"expected an error, got: {text_of(result)}"
    return text_of(result)
