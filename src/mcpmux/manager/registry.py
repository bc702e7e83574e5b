"""One index of every server's tools, resources, templates and prompts, under canonical names.

Names are looked up in tables built from the servers' lists, never derived by splitting a string,
so ``web:search`` and ``web_scraper:search`` cannot be confused. Resources and prompts are also
reachable as tools: ``server:read_resource`` (argument ``uri``) and ``server:get_prompt``.
"""

from __future__ import annotations

import bisect
import difflib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import mcp_types as types

from mcpmux.canonical_names import canonical_name
from mcpmux.config.models import DeclaredResource, declared_for
from mcpmux.errors import ToolNotFound
from mcpmux.types.models import PromptInfo, ResourceInfo, ToolInfo

__all__ = ["GET_PROMPT", "READ_RESOURCE", "IndexVersion", "Registry", "ServerCatalog", "ToolSnapshot"]

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


class IndexVersion:
    """Identifies one state of a :class:`Registry`'s tools: a new object after every change.

    Whoever derives something costly from the whole list (the poisoning scanner's name matcher)
    keeps it per version, weakly (``weakref.WeakKeyDictionary``), and builds it again only when
    the tools changed.
    """

    __slots__ = ("__weakref__",)


class ToolSnapshot(list[ToolInfo]):
    """A copy of the registry's tools (a plain list to its users) that says which version it shows."""

    __slots__ = ("version",)

    def __init__(self, tools: Iterable[ToolInfo], version: IndexVersion) -> None:
        super().__init__(tools)
        self.version = version


_Item = TypeVar("_Item", ToolInfo, PromptInfo)


class _Table(Generic[_Item]):
    """The names of one kind (tools or prompts), kept per server so one server re-indexes alone.

    A name offered by several servers goes to the earliest in configuration order; when that one
    stops offering it, the next one gets it.
    """

    def __init__(self, rank: dict[str, int]) -> None:
        self._rank = rank
        self.offers: dict[str, dict[str, _Item]] = {}
        self.claims: dict[str, list[str]] = {}
        self.winners: dict[str, _Item] = {}

    def replace(self, server: str, items: Iterable[_Item]) -> None:
        """Make ``items`` (in order; the first of equal names counts) what ``server`` offers."""
        self.withdraw(server)
        offered: dict[str, _Item] = {}
        for item in items:
            offered.setdefault(item.name, item)
        self.offers[server] = offered
        for name, item in offered.items():
            claimants = self.claims.setdefault(name, [])
            bisect.insort(claimants, server, key=self._rank.__getitem__)
            if claimants[0] == server:
                self.winners[name] = item
            if len(claimants) > 1:
                holder = claimants[0]
                logger.warning("%r is offered by %s; %r keeps it", name, " and ".join(map(repr, claimants)), holder)

    def withdraw(self, server: str) -> None:
        """Forget what ``server`` offers; names it held pass to the next server offering them."""
        for name in self.offers.pop(server, {}):
            claimants = self.claims[name]
            first = claimants[0] == server
            claimants.remove(server)
            if not claimants:
                del self.claims[name], self.winners[name]
            elif first:
                self.winners[name] = self.offers[claimants[0]][name]

    def won(self, server: str) -> list[_Item]:
        """What ``server`` offers under names it holds, in its own order."""
        winners = self.winners
        return [item for name, item in self.offers.get(server, {}).items() if winners[name] is item]

    def conflicts(self) -> dict[str, list[str]]:
        return {name: list(servers) for name, servers in self.claims.items() if len(servers) > 1}


class Registry:
    """The index of every server, updated one server at a time when that server's lists change.

    Servers are indexed in configuration order, so when two servers share a namespace (an empty or
    equal ``prefix``) the earlier one keeps a contested name; the conflict is reported, not hidden.
    A re-list costs in proportion to that server's lists, not to the whole index.
    """

    def __init__(self) -> None:
        self._order: list[str] = []
        self._rank: dict[str, int] = {}
        self._namespaces: dict[str, str] = {}
        self._catalogs: dict[str, ServerCatalog] = {}
        self._tools: _Table[ToolInfo] = _Table(self._rank)
        self._prompts: _Table[PromptInfo] = _Table(self._rank)
        self._snapshot: ToolSnapshot | None = None
        self._version = IndexVersion()
        self._declared: dict[str, tuple[DeclaredResource, ...]] = {}

    def add_server(self, server: str, namespace: str, resources: tuple[DeclaredResource, ...] | None = None) -> None:
        """Register ``server`` (in order) with the namespace of its canonical names.

        ``resources`` are its declared resources: only those are indexed (and described to the
        model in its ``read_resource`` tool); ``None`` indexes every resource it lists.
        """
        declared = self._declared.get(server)
        if resources is None:
            self._declared.pop(server, None)
        else:
            self._declared[server] = resources
        if server not in self._rank:
            self._rank[server] = len(self._order)
            self._order.append(server)
        elif self._namespaces.get(server) == namespace and declared == resources:
            return
        self._namespaces[server] = namespace
        catalog = self._catalogs.get(server)
        if catalog is not None:
            self._index_server(server, catalog)

    def remove_server(self, server: str) -> None:
        """Forget ``server`` and everything it offered."""
        self._tools.withdraw(server)
        self._prompts.withdraw(server)
        self._changed()
        if server in self._rank:
            self._order.remove(server)
            # Ranks only order servers: the survivors keep their relative order.
            self._rank.clear()
            self._rank.update((name, position) for position, name in enumerate(self._order))
        self._namespaces.pop(server, None)
        self._catalogs.pop(server, None)
        self._declared.pop(server, None)

    def update(self, server: str, catalog: ServerCatalog) -> None:
        """Replace what ``server`` offers and re-index that server."""
        self._catalogs[server] = catalog
        if server in self._rank:
            self._index_server(server, catalog)

    def catalog(self, server: str) -> ServerCatalog | None:
        """The last known lists of ``server``, or ``None`` if it was never listed."""
        return self._catalogs.get(server)

    @property
    def version(self) -> IndexVersion:
        """The current state of the tools (a new object after every change)."""
        return self._version

    # -- queries ---------------------------------------------------------------------------

    def tools(self, server: str | None = None) -> list[ToolInfo]:
        """Every indexed tool (of one server if given), in server order then the server's order.

        The whole list is a :class:`ToolSnapshot` (a copy: changing it changes nothing here).
        """
        if server is not None:
            return self._tools.won(server)
        if self._snapshot is None:
            tools = (info for name in self._order for info in self._tools.won(name))
            self._snapshot = ToolSnapshot(tools, self._version)
        return ToolSnapshot(self._snapshot, self._version)

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """Every indexed prompt (of one server if given)."""
        return [p for name in self._order if server in (None, name) for p in self._prompts.won(name)]

    def resources(self, server: str | None = None) -> list[ResourceInfo]:
        """Every resource and resource template (of one server if given)."""
        out: list[ResourceInfo] = []
        for name in self._order:
            catalog = self._catalogs.get(name)
            if catalog is None or (server is not None and name != server):
                continue
            catalog = self._exposed(name, catalog)
            out += [_resource_info(name, r) for r in catalog.resources]
            out += [_template_info(name, t) for t in catalog.templates]
        return out

    def resolve_tool(self, name: str) -> ToolInfo:
        """The tool called ``name`` (canonical).

        Raises:
            ToolNotFound: no such tool; the closest names are suggested.
        """
        return _resolve(self._tools.winners, name, "tool")

    def current(self, tool: ToolInfo) -> bool:
        """Whether ``tool`` is still the index's entry for its name (its server has not re-listed since)."""
        return self._tools.winners.get(tool.name) is tool

    def resolve_prompt(self, name: str) -> PromptInfo:
        """The prompt called ``name`` (canonical).

        Raises:
            ToolNotFound: no such prompt; the closest names are suggested.
        """
        return _resolve(self._prompts.winners, name, "prompt")

    def conflicts(self, server: str | None = None) -> dict[str, list[str]]:
        """Canonical names claimed by more than one server: name -> servers (the first one won)."""
        found = self._tools.conflicts()
        for name, servers in self._prompts.conflicts().items():
            found[name] = found.get(name, []) + [s for s in servers if s not in found.get(name, [])]
        return {n: s for n, s in found.items() if server is None or server in s}

    # -- building --------------------------------------------------------------------------

    def _exposed(self, server: str, catalog: ServerCatalog) -> ServerCatalog:
        """``catalog`` with only the declared resources and templates of ``server`` (all if none are)."""
        declared = self._declared.get(server)
        if declared is None:
            return catalog
        resources = tuple(r for r in catalog.resources if declared_for(declared, str(r.uri)))
        templates = tuple(t for t in catalog.templates if declared_for(declared, t.uri_template))
        return replace(catalog, resources=resources, templates=templates)

    def _index_server(self, server: str, catalog: ServerCatalog) -> None:
        namespace = self._namespaces[server]
        infos = [_tool_info(server, namespace, t) for t in catalog.tools]
        own = {t.tool for t in infos}
        catalog = self._exposed(server, catalog)
        if (catalog.resources or catalog.templates) and READ_RESOURCE not in own:
            infos.append(_read_resource_tool(server, namespace, catalog, self._declared.get(server, ())))
        if catalog.prompts and GET_PROMPT not in own:
            infos.append(_get_prompt_tool(server, namespace, catalog.prompts))
        self._tools.replace(server, infos)
        self._prompts.replace(server, (_prompt_info(server, namespace, p) for p in catalog.prompts))
        self._changed()

    def _changed(self) -> None:
        self._snapshot = None
        self._version = IndexVersion()


_Found = TypeVar("_Found")


def _resolve(table: dict[str, _Found], name: str, kind: str) -> _Found:
    found = table.get(name)
    if found is None:
        raise ToolNotFound(name, difflib.get_close_matches(name, list(table), n=3, cutoff=0.5), kind=kind)
    return found


def _tool_info(server: str, namespace: str, tool: types.Tool) -> ToolInfo:
    return ToolInfo(canonical_name(namespace, tool.name), server, tool)


def _read_resource_tool(
    server: str, namespace: str, catalog: ServerCatalog, declared: tuple[DeclaredResource, ...] = ()
) -> ToolInfo:
    lines = [f"Read a resource of the {server!r} MCP server by URI."]
    described = [d for d in declared if d.description]
    if described:
        lines.append("What its resources are (from the configuration):")
        lines += [f"- {d.uri}: {d.description}" for d in described]
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
