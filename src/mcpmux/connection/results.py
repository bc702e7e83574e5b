"""A small normalised view of a tool result, for callers that do not want the raw content blocks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcpmux.errors import ToolError

__all__ = ["ToolResult", "raise_for_tool_error"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One ``tools/call`` result, sorted by kind.

    Attributes:
        text: the text blocks joined with newlines.
        images: image blocks, in order.
        audio: audio blocks, in order.
        resources: embedded resources, in order.
        links: resource links, in order.
        structured: the ``structuredContent`` object, if the tool returned one.
        is_error: the tool reported failure (``isError: true``).
        raw: the SDK result it was made from.
    """

    text: str
    images: tuple[types.ImageContent, ...]
    audio: tuple[types.AudioContent, ...]
    resources: tuple[types.EmbeddedResource, ...]
    links: tuple[types.ResourceLink, ...]
    structured: dict[str, Any] | None
    is_error: bool
    raw: types.CallToolResult

    @classmethod
    def of(cls, result: types.CallToolResult) -> ToolResult:
        """Sort the content blocks of ``result``."""
        blocks = result.content
        return cls(
            text="\n".join(b.text for b in blocks if isinstance(b, types.TextContent)),
            images=tuple(b for b in blocks if isinstance(b, types.ImageContent)),
            audio=tuple(b for b in blocks if isinstance(b, types.AudioContent)),
            resources=tuple(b for b in blocks if isinstance(b, types.EmbeddedResource)),
            links=tuple(b for b in blocks if isinstance(b, types.ResourceLink)),
            structured=result.structured_content,
            is_error=bool(result.is_error),
            raw=result,
        )

    def raise_for_error(self, server: str, tool: str) -> ToolResult:
        """Return ``self``, or raise :class:`ToolError` if the tool reported failure.

        Raises:
            ToolError: ``is_error`` is set; ``text`` carries what the tool said.
        """
        if self.is_error:
            raise ToolError(server, tool, self.text or "(no text)")
        return self


def raise_for_tool_error(server: str, tool: str, result: types.CallToolResult) -> types.CallToolResult:
    """Return ``result``, or raise :class:`ToolError` if it has ``isError: true``.

    Raises:
        ToolError: the tool reported failure.
    """
    ToolResult.of(result).raise_for_error(server, tool)
    return result
