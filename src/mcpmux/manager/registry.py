"""One index of every server's tools, resources, templates and prompts, under canonical names.

Names are looked up in tables built from the servers' lists, never derived by splitting a string,
so ``web:search`` and ``web_scraper:search`` cannot be confused. Resources and prompts are also
reachable as tools: ``server:read_resource`` (argument ``uri``) and ``server:get_prompt``.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types as types

from mcpmux.canonical_names import canonical_name
from mcpmux.errors import ToolNotFound
from mcpmux.manager.models import PromptInfo, ResourceInfo, ToolInfo

__all__ = ["GET_PROMPT", "READ_RESOURCE", "Registry", "ServerCatalog"]

logger = logging.getLogger(__name__)

READ_RESOURCE = "read_resource"
GET_PROMPT = "get_prompt"
_LISTED_IN_DESCRIPTION = 25


@dataclass(frozen=True, slots=True)
class ServerCatalog:
    """What one server offers, as last listed (live or from the catalog cache)."""

    tools: tuple[types.Tool, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()


@dataclass(slots=True)
class _Index:
    tools: dict[str, ToolInfo] = field(default_factory=dict)
    prompts: dict[str, PromptInfo] = field(default_factory=dict)
    conflicts: dict[str, list[str]] = field(default_factory=dict)


class Registry:
    """The index of every server, rebuilt whenever one server's lists change.

    Servers are indexed in configuration order, so when two servers share a namespace (an empty or
    equal ``prefix``) the earlier one keeps a contested name; the conflict is reported, not hidden.
    """

    def __init__(self) -> None:
        self._order: list[str] = []
        self._namespaces: dict[str, str] = {}
        self._catalogs: dict[str, ServerCatalog] = {}
        self._index = _Index()

    def add_server(self, server: str, namespace: str) -> None:
        """Register ``server`` (in order) with the namespace of its canonical names."""
        if server not in self._order:
            self._order.append(server)
        self._namespaces[server] = namespace

    def remove_server(self, server: str) -> None:
        """Forget ``server`` and everything it offered."""
        if server in self._order:
            self._order.remove(server)
        self._namespaces.pop(server, None)
        self._catalogs.pop(server, None)
        self._rebuild()

    def update(self, server: str, catalog: ServerCatalog) -> None:
        """Replace what ``server`` offers and rebuild the index."""
        self._catalogs[server] = catalog
        self._rebuild()

    def catalog(self, server: str) -> ServerCatalog | None:
        """The last known lists of ``server``, or ``None`` if it was never listed."""
        return self._catalogs.get(server)

    # -- queries ---------------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[ToolInfo]:
        """Every indexed tool (of one server if given), in server order then the server's order."""
        return [t for t in self._index.tools.values() if server is None or t.server == server]

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """Every indexed prompt (of one server if given)."""
        return [p for p in self._index.prompts.values() if server is None or p.server == server]

    def resources(self, server: str | None = None) -> list[ResourceInfo]:
        """Every resource and resource template (of one server if given)."""
        out: list[ResourceInfo] = []
        for name in self._order:
            catalog = self._catalogs.get(name)
            if catalog is None or (server is not None and name != server):
                continue
            out += [_resource_info(name, r) for r in catalog.resources]
            out += [_template_info(name, t) for t in catalog.templates]
        return out

    def resolve_tool(self, name: str) -> ToolInfo:
        """The tool called ``name`` (canonical).

        Raises:
            ToolNotFound: no such tool; the closest names are suggested.
        """
        return _resolve(self._index.tools, name, "tool")

    def current(self, tool: ToolInfo) -> bool:
        """Whether ``tool`` is still the index's entry for its name (its server has not re-listed since)."""
        return self._index.tools.get(tool.name) is tool

    def resolve_prompt(self, name: str) -> PromptInfo:
        """The prompt called ``name`` (canonical).

        Raises:
            ToolNotFound: no such prompt; the closest names are suggested.
        """
        return _resolve(self._index.prompts, name, "prompt")

    def conflicts(self, server: str | None = None) -> dict[str, list[str]]:
        """Canonical names claimed by more than one server: name -> servers (the first one won)."""
        return {n: s for n, s in self._index.conflicts.items() if server is None or server in s}

    # -- building --------------------------------------------------------------------------

    def _rebuild(self) -> None:
        index = _Index()
        for server in self._order:
            catalog = self._catalogs.get(server)
            if catalog is not None:
                self._index_server(index, server, self._namespaces[server], catalog)
        self._index = index

    def _index_server(self, index: _Index, server: str, namespace: str, catalog: ServerCatalog) -> None:
        infos = [_tool_info(server, namespace, t) for t in catalog.tools]
        own = {t.tool for t in infos}
        if (catalog.resources or catalog.templates) and READ_RESOURCE not in own:
            infos.append(_read_resource_tool(server, namespace, catalog))
        if catalog.prompts and GET_PROMPT not in own:
            infos.append(_get_prompt_tool(server, namespace, catalog.prompts))
        _claim(index.tools, index.conflicts, ((t.name, t) for t in infos), server)
        prompts = (_prompt_info(server, namespace, p) for p in catalog.prompts)
        _claim(index.prompts, index.conflicts, ((p.name, p) for p in prompts), server)


_Found = TypeVar("_Found")


def _resolve(table: dict[str, _Found], name: str, kind: str) -> _Found:
    found = table.get(name)
    if found is None:
        raise ToolNotFound(name, difflib.get_close_matches(name, list(table), n=3, cutoff=0.5), kind=kind)
    return found


def _claim(
    table: dict[str, Any], conflicts: dict[str, list[str]], items: Iterable[tuple[str, Any]], server: str
) -> None:
    for name, item in items:
        holder = table.get(name)
        if holder is None:
            table[name] = item
        elif holder.server != server:
            conflicts.setdefault(name, [holder.server]).append(server)
            logger.warning("%r is offered by %r and %r; %r keeps it", name, holder.server, server, holder.server)


def _tool_info(server: str, namespace: str, tool: types.Tool) -> ToolInfo:
    return ToolInfo(canonical_name(namespace, tool.name), server, tool)


def _read_resource_tool(server: str, namespace: str, catalog: ServerCatalog) -> ToolInfo:
    lines = [f"Read a resource of the {server!r} MCP server by URI."]
    if catalog.resources:
        lines.append("Resources:")
        lines += [f"- {r.uri}" + (f" ({r.name})" if r.name else "") for r in catalog.resources[:_LISTED_IN_DESCRIPTION]]
        if len(catalog.resources) > _LISTED_IN_DESCRIPTION:
            lines.append(f"- ... and {len(catalog.resources) - _LISTED_IN_DESCRIPTION} more")
    if catalog.templates:
        lines.append("URI templates (fill in the {placeholders}):")
        lines += [f"- {t.uri_template}" + (f" ({t.name})" if t.name else "") for t in catalog.templates]
    schema = {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "The URI of the resource to read."}},
        "required": ["uri"],
    }
    return ToolInfo.make(
        name=canonical_name(namespace, READ_RESOURCE),
        server=server,
        tool=READ_RESOURCE,
        description="\n".join(lines),
        input_schema=schema,
        annotations={"readOnlyHint": True},
        synthetic=True,
    )


def _get_prompt_tool(server: str, namespace: str, prompts: tuple[types.Prompt, ...]) -> ToolInfo:
    lines = [f"Get a prompt of the {server!r} MCP server, rendered with arguments. Prompts:"]
    for p in prompts:
        args = ", ".join(a.name + ("" if a.required else "?") for a in p.arguments or [])
        lines.append(f"- {p.name}({args})" + (f": {p.description}" if p.description else ""))
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": [p.name for p in prompts], "description": "The prompt's name."},
            "arguments": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "The prompt's arguments (strings).",
            },
        },
        "required": ["name"],
    }
    return ToolInfo.make(
        name=canonical_name(namespace, GET_PROMPT),
        server=server,
        tool=GET_PROMPT,
        description="\n".join(lines),
        input_schema=schema,
        annotations={"readOnlyHint": True},
        synthetic=True,
    )


def _prompt_info(server: str, namespace: str, prompt: types.Prompt) -> PromptInfo:
    arguments = tuple((a.name, bool(a.required)) for a in prompt.arguments or [])
    return PromptInfo(canonical_name(namespace, prompt.name), server, prompt.name, prompt.description or "", arguments)


def _resource_info(server: str, resource: types.Resource) -> ResourceInfo:
    return ResourceInfo(server, resource.uri, resource.name, resource.description or "", resource.mime_type, False)


def _template_info(server: str, template: types.ResourceTemplate) -> ResourceInfo:
    return ResourceInfo(
        server, template.uri_template, template.name, template.description or "", template.mime_type, True
    )
