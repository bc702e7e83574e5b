"""MCP tools as LLM function-calling tools: names, schemas, descriptions, and the call path.

:class:`ToolBridge` reads tools from any :class:`ToolSource` (the Manager is one) and hands out
:class:`BridgeTool` entries for one provider profile. A call by provider name is routed through
the profile's :class:`~mcpmux.provider_names.NameTable`, never by splitting the name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

import mcp_types as types

from mcpmux.bridge.results import DEFAULT_MAX_RESULT_BYTES, ModelResult, normalise_result
from mcpmux.bridge.schema import normalise_schema
from mcpmux.provider_names import DEFAULT_SEPARATOR, NameTable
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    # Types only: the bridge talks to the manager through the ToolSource protocol.
    from mcpmux.types.models import ToolInfo

__all__ = ["DESCRIPTION_LIMITS", "BridgeTool", "ToolBridge", "ToolHandler", "ToolSource", "shorten_description"]

# OpenAI rejects function descriptions above 1024 characters; the others document no limit.
DESCRIPTION_LIMITS: Mapping[str, int | None] = MappingProxyType(
    {"openai": 1024, "anthropic": None, "gemini": None, "mcp": None}
)
_TRUNCATED = " …[description truncated]"

ToolHandler = Callable[[JSONObject], Awaitable[ModelResult]]


class ToolSource(Protocol):
    """Where the bridge finds tools and sends calls; ``Manager`` satisfies it."""

    def tools(self) -> list[ToolInfo]:
        """Every tool now available, with canonical names."""
        ...

    async def call_tool(self, name: str | ToolInfo, arguments: JSONObject | None = None) -> types.CallToolResult:
        """Call the tool with canonical ``name`` (or the :class:`ToolInfo` listed, not resolved again)."""
        ...


@dataclass(frozen=True, slots=True)
class BridgeTool:
    """One tool as a provider sees it.

    Attributes:
        name: the provider name (what the model calls).
        canonical: the canonical name, ``server:tool``.
        description: the server's description, shortened to the provider's limit.
        parameters: the normalised input schema.
        handler: calls the tool with the model's arguments and returns the normalised result.
    """

    name: str
    canonical: str
    description: str
    parameters: JSONObject
    handler: ToolHandler = field(compare=False, repr=False)

    def to_openai(self) -> JSONObject:
        """The Chat Completions ``tools`` entry."""
        function = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return {"type": "function", "function": function}

    def to_anthropic(self) -> JSONObject:
        """The Messages API ``tools`` entry."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}

    def to_gemini(self) -> JSONObject:
        """A ``FunctionDeclaration``; ``parameters`` is left out when the tool takes none (Gemini
        rejects an object schema with empty ``properties``)."""
        declaration: JSONObject = {"name": self.name, "description": self.description}
        if self.parameters.get("properties"):
            declaration["parameters"] = self.parameters
        return declaration


class ToolBridge:
    """Provider-ready tools over a :class:`ToolSource`.

    Args:
        source: where tools come from and calls go (the Manager).
        separator: joins namespace and tool in provider names.
        max_result_bytes: the cap on a result's text (see :func:`normalise_result`).
    """

    def __init__(
        self,
        source: ToolSource,
        *,
        separator: str = DEFAULT_SEPARATOR,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        self._source = source
        self._separator = separator
        self._max_result_bytes = max_result_bytes
        self._tables: dict[tuple[str, tuple[str, ...]], NameTable] = {}
        self._built: dict[str, dict[str, tuple[ToolInfo, BridgeTool]]] = {}

    def names(self, profile: str = "openai") -> NameTable:
        """The name table of the source's current tools for ``profile``.

        Raises:
            NameCollision: two tools map to one provider name.
        """
        return self._table(profile, self._source.tools())

    def tools(self, profile: str = "openai") -> list[BridgeTool]:
        """Every tool of the source, ready for ``profile``, in canonical-name order.

        Raises:
            NameCollision: two tools map to one provider name (both are named).
            ValueError: unknown profile.
        """
        infos = sorted(self._source.tools(), key=lambda info: info.name)
        table = self._table(profile, infos)
        previous = self._built.get(profile, {})
        built: dict[str, tuple[ToolInfo, BridgeTool]] = {}
        for info in infos:
            cached = previous.get(info.name)
            # The source hands out the same ToolInfo until a server re-lists, so identity is enough.
            tool = cached[1] if cached and cached[0] is info else self._bridge_tool(info, table, profile)
            built[info.name] = (info, tool)
        self._built[profile] = built
        return [tool for _, tool in built.values()]

    async def call(
        self, provider_name: str, arguments: JSONObject | None = None, *, profile: str = "openai"
    ) -> ModelResult:
        """Call a tool by its provider name and return the normalised result.

        Raises:
            ToolNotFound: no tool has that provider name (closest names suggested).
            NameCollision: two tools map to one provider name.
            MCPMuxError: whatever the source raises for the call (unavailable, timeout, ...).
        """
        canonical = self.names(profile).to_canonical(provider_name)
        listed = self._built.get(profile, {}).get(canonical)
        target: str | ToolInfo = listed[0] if listed is not None else canonical
        result = await self._source.call_tool(target, arguments or {})
        return normalise_result(result, max_bytes=self._max_result_bytes, profile=profile)

    def _table(self, profile: str, infos: list[ToolInfo]) -> NameTable:
        key = (profile, tuple(sorted(info.name for info in infos)))
        table = self._tables.get(key)
        if table is None:
            table = NameTable(key[1], profile, separator=self._separator)
            # One table per profile is enough: the previous tool set is not coming back soon.
            self._tables = {k: v for k, v in self._tables.items() if k[0] != profile}
            self._tables[key] = table
        return table

    def _bridge_tool(self, info: ToolInfo, table: NameTable, profile: str) -> BridgeTool:
        return BridgeTool(
            name=table.to_provider(info.name),
            canonical=info.name,
            description=shorten_description(_describe(info), DESCRIPTION_LIMITS.get(profile)),
            parameters=normalise_schema(info.input_schema, profile),
            handler=partial(self._call_listed, info, profile),
        )

    async def _call_listed(self, info: ToolInfo, profile: str, arguments: JSONObject) -> ModelResult:
        result = await self._source.call_tool(info, arguments)
        return normalise_result(result, max_bytes=self._max_result_bytes, profile=profile)


def _describe(info: ToolInfo) -> str:
    text = info.description.strip() or (info.title or "").strip()
    return text or f"Tool {info.tool!r} of server {info.server!r}."


def shorten_description(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters at a word boundary, ending with a truncation marker."""
    if limit is None or len(text) <= limit:
        return text
    head = text[: limit - len(_TRUNCATED)]
    # Prefer ending on a word boundary when one is near the cut.
    space = head.rfind(" ", len(head) - 80)
    return (head[:space] if space > 0 else head).rstrip() + _TRUNCATED
