"""Progressive discovery: ``search_tools`` and ``call_tool`` instead of a flood of tool definitions.

With ``discovery: search`` (or ``auto:N`` once a caller would see more than N tools) the gateway
lists only two tools of its own, plus the tools matching ``always_load``:

- ``search_tools {query, limit?}``: BM25 (SQLite FTS5, :class:`~mcpmux.bridge.tool_search.ToolIndex`)
  over names, descriptions and parameter names of the tools the caller may see; the answer holds
  their full definitions (``structuredContent.tools``, and the same JSON as text);
- ``call_tool {name, arguments?}``: calls one of those tools by its listed name, through the same
  guarded path as a direct call (rules, pins, approval, audit; a tool outside the caller's view is
  unknown, exactly as when called directly).

A tool found by a search may also be called directly by its name. Both meta-tools take precedence
over an upstream tool listed under the same bare name while searching.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcpmux.bridge.tool_search import ToolIndex
from mcpmux.config.models import DiscoveryConfig
from mcpmux.gateway.surface import Surface
from mcpmux.types.json_shapes import JSONObject

__all__ = ["CALL_TOOL", "META_TOOLS", "SEARCH_TOOLS", "Discovery", "Listing"]

SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"
META_TOOLS = (SEARCH_TOOLS, CALL_TOOL)
MAX_QUERY_CHARS = 1000

SEARCH_TOOLS_DEFINITION = types.Tool(
    name=SEARCH_TOOLS,
    description=(
        "Find tools by what they do: a few keywords (names, actions, objects) return the best matching "
        "tools with their full definitions. Call one with call_tool, or directly by its name."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "keywords: names, actions, objects"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "most tools to return"},
        },
        "required": ["query"],
    },
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
CALL_TOOL_DEFINITION = types.Tool(
    name=CALL_TOOL,
    description="Call a tool found with search_tools, by its name, with its arguments.",
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the tool's name, as search_tools returned it"},
            "arguments": {"type": "object", "description": "the tool's arguments (its inputSchema)"},
        },
        "required": ["name"],
    },
)


@dataclass(frozen=True, slots=True)
class _Entry:
    """One listed tool, as the index reads it."""

    name: str
    canonical: str
    description: str
    parameters: JSONObject
    tool: types.Tool


@dataclass(frozen=True, slots=True)
class Listing:
    """What one surface lists under one discovery setting, and the index its searches use."""

    tools: list[types.Tool]
    searching: bool
    index: ToolIndex[_Entry] | None = None


class Discovery:
    """The discovery setting of one gateway path, applied to its surfaces."""

    def __init__(self, config: DiscoveryConfig) -> None:
        self.config = config
        self._listing: tuple[Surface, Listing] | None = None

    def listing(self, surface: Surface) -> Listing:
        """The tools ``surface`` lists (built once per surface)."""
        cached = self._listing
        if cached is not None and cached[0] is surface:
            return cached[1]
        listing = self._build(surface)
        if cached is not None and cached[1].index is not None:
            cached[1].index.close()
        self._listing = (surface, listing)
        return listing

    def _build(self, surface: Surface) -> Listing:
        if not self.config.searching(len(surface.tools)):
            return Listing(surface.tools, searching=False)
        entries = [_entry(surface, tool) for tool in surface.tools]
        pinned = [e.tool for e in entries if self._always(e)]
        listed = [SEARCH_TOOLS_DEFINITION, CALL_TOOL_DEFINITION, *(t for t in pinned if t.name not in META_TOOLS)]
        return Listing(listed, searching=True, index=ToolIndex(entries))

    def _always(self, entry: _Entry) -> bool:
        return any(fnmatchcase(entry.canonical, p) or fnmatchcase(entry.name, p) for p in self.config.always_load)

    def search(self, listing: Listing, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Answer ``search_tools``: the best matches with their full definitions.

        Raises:
            MCPError: the arguments are not ``{query: string, limit?: integer}`` (Invalid Params).
        """
        query, limit = _search_arguments(arguments or {}, self.config.limit)
        assert listing.index is not None, "search_tools is listed only while searching"
        hits = listing.index.search(query, limit)
        found = [hit.tool.model_dump(mode="json", by_alias=True, exclude_none=True) for hit in hits]
        if not found:
            text = f"No tool matches {query!r}; try other words (names, actions, objects)."
        else:
            text = json.dumps({"tools": found}, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content={"tools": found})


def call_arguments(arguments: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
    """The tool name and arguments of a ``call_tool`` call.

    Raises:
        MCPError: ``name`` is missing or not a string, or ``arguments`` not an object (Invalid Params).
    """
    arguments = arguments or {}
    name, inner = arguments.get("name"), arguments.get("arguments")
    if not isinstance(name, str) or not name:
        raise MCPError(types.INVALID_PARAMS, "call_tool needs `name`: the tool's name as search_tools returned it")
    if inner is not None and not isinstance(inner, dict):
        raise MCPError(types.INVALID_PARAMS, f"call_tool `arguments` must be an object, not {type(inner).__name__}")
    if name in META_TOOLS:
        raise MCPError(types.INVALID_PARAMS, f"call_tool cannot call {name}: call it directly")
    return name, inner


def _search_arguments(arguments: dict[str, Any], default_limit: int) -> tuple[str, int]:
    query, limit = arguments.get("query"), arguments.get("limit", default_limit)
    if not isinstance(query, str) or not query.strip():
        raise MCPError(types.INVALID_PARAMS, "search_tools needs `query`: a few keywords")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
        raise MCPError(types.INVALID_PARAMS, "search_tools `limit` must be an integer from 1 to 100")
    return query[:MAX_QUERY_CHARS], limit


def _entry(surface: Surface, tool: types.Tool) -> _Entry:
    canonical = surface.tool_names.to_canonical(tool.name)
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    return _Entry(tool.name, canonical, tool.description or "", schema, tool)
