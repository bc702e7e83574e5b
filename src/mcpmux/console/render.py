"""How values look on the console's pages: times, JSON, and tool results as safe blocks.

A result's text is shown as text (autoescaped by the templates); an image only as a ``data:`` URL
of a raster type (never SVG, which can carry script); anything else as its JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from typing import Any

import mcp_types as types

__all__ = ["FILTERS", "Block", "blocks_of", "pretty_json"]

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of a result: ``text``, ``json`` or ``image`` (``value`` is text or a ``data:`` URL)."""

    kind: str
    value: str
    label: str = ""


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-JSON values as their text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=False)


def when(at: float | None) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS`` UTC."""
    return "" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def blocks_of(result: types.CallToolResult | types.GetPromptResult | types.ReadResourceResult) -> list[Block]:
    """The blocks to show for a tool result, a rendered prompt or a read resource."""
    if isinstance(result, types.CallToolResult):
        shown = [_content(c) for c in result.content]
        if result.structured_content is not None:
            shown.append(Block("json", pretty_json(result.structured_content), "structured content"))
        return shown
    if isinstance(result, types.GetPromptResult):
        return [
            Block(b.kind, b.value, f"{m.role}: {b.label}".rstrip(": "))
            for m in result.messages
            for b in [_content(m.content)]
        ]
    return [_resource(c) for c in result.contents]


def _content(block: Any) -> Block:
    if isinstance(block, types.TextContent):
        return Block("text", block.text)
    if isinstance(block, types.ImageContent):
        return _image(block.mime_type, block.data)
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(block, "model_dump") else block
    return Block("json", pretty_json(dumped), str(getattr(block, "type", "")))


def _resource(contents: types.TextResourceContents | types.BlobResourceContents) -> Block:
    if isinstance(contents, types.TextResourceContents):
        return Block("text", contents.text, contents.uri)
    if contents.mime_type in IMAGE_TYPES:
        return _image(contents.mime_type, contents.blob)
    return Block(
        "text", f"({len(contents.blob) * 3 // 4} bytes of {contents.mime_type or 'binary data'})", contents.uri
    )


def _image(mime_type: str, data: str) -> Block:
    if mime_type not in IMAGE_TYPES:
        return Block("text", f"(an image of type {mime_type}, not shown)")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return Block("text", "(an image whose data is not valid base64, not shown)")
    return Block("image", f"data:{mime_type};base64,{data}", mime_type)


FILTERS = {"pretty_json": pretty_json, "when": when}
