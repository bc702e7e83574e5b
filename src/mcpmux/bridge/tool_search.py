"""Too many tools for one request: a ``search_tools`` tool over a BM25 index (SQLite FTS5).

Past a threshold, the model sees only ``search_tools``, the tools pinned by ``always_load``
patterns, and the tools its searches selected; every hit of a search joins the next request.
The index covers provider and canonical names, descriptions and parameter names.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from typing import Generic, Protocol, TypeVar

from mcpmux.bridge.results import ModelResult
from mcpmux.bridge.tools import BridgeTool
from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "DEFAULT_TOOL_THRESHOLD",
    "SEARCH_TOOL_NAME",
    "Searchable",
    "ToolIndex",
    "ToolSelection",
    "estimate_tokens",
]

DEFAULT_TOOL_THRESHOLD = 40
DEFAULT_SEARCH_LIMIT = 8
SEARCH_TOOL_NAME = "search_tools"
_WORD = re.compile(r"\w+")
# Tokens are estimated as JSON characters / 4 (tiktoken is not a dependency).
CHARS_PER_TOKEN = 4

SEARCH_TOOL_DEFINITION: JSONObject = {
    "type": "function",
    "function": {
        "name": SEARCH_TOOL_NAME,
        "description": (
            "Find tools by what they do. Only some tools are loaded; search with a few keywords and "
            "the matching tools become callable in your next step."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "keywords: names, actions, objects"},
                "limit": {"type": "integer", "description": f"most tools to load (default {DEFAULT_SEARCH_LIMIT})"},
            },
            "required": ["query"],
        },
    },
}


class Searchable(Protocol):
    """What the index reads of a tool (a :class:`BridgeTool`, or a gateway's listed tool)."""

    @property
    def name(self) -> str: ...
    @property
    def canonical(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> JSONObject: ...


_T = TypeVar("_T", bound=Searchable)


def estimate_tokens(definitions: Iterable[JSONObject]) -> int:
    """Tokens of tool definitions, estimated as their JSON length / 4."""
    return sum(len(json.dumps(d, ensure_ascii=False)) for d in definitions) // CHARS_PER_TOKEN


class ToolIndex(Generic[_T]):
    """BM25 search over tools, in an in-memory SQLite FTS5 table."""

    def __init__(self, tools: Sequence[_T]) -> None:
        self._tools = list(tools)
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE tools USING fts5(name, canonical, description, parameters)")
        self._db.executemany(
            "INSERT INTO tools (rowid, name, canonical, description, parameters) VALUES (?, ?, ?, ?, ?)",
            [(i, t.name, t.canonical, t.description, " ".join(_parameter_names(t))) for i, t in enumerate(tools)],
        )

    def search(self, query: str, limit: int = DEFAULT_SEARCH_LIMIT) -> list[_T]:
        """The best ``limit`` tools for ``query``, best first (any word may match)."""
        words = _WORD.findall(query.lower())
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        # Names weigh more than descriptions: bm25 column weights follow the table's column order.
        rows = self._db.execute(
            "SELECT rowid FROM tools WHERE tools MATCH ? ORDER BY bm25(tools, 4.0, 4.0, 1.0, 2.0) LIMIT ?",
            (match, max(1, limit)),
        ).fetchall()
        return [self._tools[row[0]] for row in rows]

    def close(self) -> None:
        """Drop the index."""
        self._db.close()


def _parameter_names(tool: Searchable) -> list[str]:
    properties = tool.parameters.get("properties")
    return list(properties) if isinstance(properties, dict) else []


class ToolSelection:
    """Which tools go into the next request.

    Args:
        threshold: above this many tools, switch to search.
        always_load: ``fnmatch`` patterns (canonical or provider names) of tools always sent.
    """

    def __init__(self, threshold: int = DEFAULT_TOOL_THRESHOLD, always_load: Sequence[str] = ()) -> None:
        self.threshold, self.always_load = threshold, tuple(always_load)
        self.selected: set[str] = set()
        self._tools: list[BridgeTool] = []
        self._index: ToolIndex[BridgeTool] | None = None

    def update(self, tools: Sequence[BridgeTool]) -> None:
        """Take the current tool set (the index is rebuilt when it changed)."""
        if list(tools) != self._tools:
            self.close()
            self._tools = list(tools)

    @property
    def searching(self) -> bool:
        """Whether the model gets ``search_tools`` instead of every tool."""
        return len(self._tools) > self.threshold

    def visible(self) -> list[BridgeTool]:
        """The tools whose definitions are sent."""
        if not self.searching:
            return list(self._tools)
        return [t for t in self._tools if t.name in self.selected or self._pinned(t)]

    def definitions(self) -> list[JSONObject]:
        """The Chat Completions ``tools`` entries of the next request."""
        entries = [t.to_openai() for t in self.visible()]
        return [SEARCH_TOOL_DEFINITION, *entries] if self.searching else entries

    def search(self, arguments: JSONObject) -> ModelResult:
        """Answer a ``search_tools`` call and select its hits."""
        if self._index is None:
            self._index = ToolIndex(self._tools)
        limit = arguments.get("limit")
        hits = self._index.search(str(arguments.get("query", "")), limit if isinstance(limit, int) else 8)
        self.selected.update(t.name for t in hits)
        if not hits:
            return ModelResult(("No tool matches; try other words.",))
        lines = [f"- {t.name}: {t.description.splitlines()[0] if t.description else ''}" for t in hits]
        return ModelResult(("Loaded these tools; call them directly:\n" + "\n".join(lines),))

    def _pinned(self, tool: BridgeTool) -> bool:
        return any(fnmatchcase(tool.canonical, p) or fnmatchcase(tool.name, p) for p in self.always_load)

    def close(self) -> None:
        """Drop the index."""
        if self._index is not None:
            self._index.close()
            self._index = None
