"""What the gateway shows downstream: every upstream's tools, prompts and resources under gateway names.

Tools and prompts go out through a :class:`~mcpmux.provider_names.NameTable` of the ``mcp`` profile
(``server__tool`` by default; a server with an empty prefix keeps its bare names when they are
unambiguous). Calls come back through the same table, never by splitting a name.

Resource URIs are kept as they are when exactly one server lists them. A URI listed by two or
more servers goes out as ``mcpmux://SERVER/<percent-encoded original URI>`` for each of them,
and that wrapper is decoded on read. Template URIs are kept as they are; a URI expanded from a
template is routed to the server whose template's literal prefix matches it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from difflib import get_close_matches
from urllib.parse import quote, unquote

import mcp_types as types

from mcpmux.errors import ToolNotFound
from mcpmux.policy import Guard
from mcpmux.provider_names import DEFAULT_SEPARATOR, NameTable
from mcpmux.types import PromptInfo, ResourceInfo, ToolInfo

__all__ = ["WRAPPED_URI_SCHEME", "Surface", "build_surface"]

WRAPPED_URI_SCHEME = "mcpmux"
_WRAP_PREFIX = f"{WRAPPED_URI_SCHEME}://"


@dataclass(frozen=True, slots=True)
class Surface:
    """One snapshot of the downstream view, and the way back to each upstream."""

    tools: list[types.Tool]
    tool_names: NameTable
    prompts: list[types.Prompt]
    prompt_names: NameTable
    resources: list[types.Resource]
    templates: list[types.ResourceTemplate]
    _tools: dict[str, ToolInfo] = field(default_factory=dict)
    _prompts: dict[str, PromptInfo] = field(default_factory=dict)
    _uris: dict[str, tuple[str, str]] = field(default_factory=dict)
    _template_servers: dict[str, str] = field(default_factory=dict)

    @property
    def tool_infos(self) -> list[ToolInfo]:
        """The upstream tools behind :attr:`tools`."""
        return list(self._tools.values())

    @property
    def prompt_infos(self) -> list[PromptInfo]:
        """The upstream prompts behind :attr:`prompts`."""
        return list(self._prompts.values())

    @property
    def resource_targets(self) -> list[tuple[str, str]]:
        """``(server, upstream URI)`` of every listed resource."""
        return list(self._uris.values())

    @property
    def template_servers(self) -> list[str]:
        """The server of every listed template."""
        return list(self._template_servers.values())

    def tool(self, name: str) -> ToolInfo:
        """The tool behind the downstream name ``name``, resolved once here (raises :class:`ToolNotFound`)."""
        return self._tools[self.tool_names.to_canonical(name)]

    def prompt(self, name: str) -> PromptInfo:
        """The prompt behind the downstream name ``name`` (raises :class:`ToolNotFound`)."""
        return self._prompts[self.prompt_names.to_canonical(name)]

    def resource(self, uri: str) -> tuple[str, str]:
        """The ``(server, upstream URI)`` behind the downstream ``uri``.

        Raises:
            ToolNotFound: no server lists the URI or a template that matches it.
        """
        if uri in self._uris:
            return self._uris[uri]
        if uri.startswith(_WRAP_PREFIX):
            server, _, quoted = uri.removeprefix(_WRAP_PREFIX).partition("/")
            return server, unquote(quoted)
        matches = {s for t, s in self._template_servers.items() if _template_matches(t, uri)}
        if len(matches) == 1:
            return matches.pop(), uri
        raise ToolNotFound(uri, get_close_matches(uri, self._uris, n=3, cutoff=0.5), kind="resource")

    def downstream_uri(self, server: str, uri: str) -> str:
        """The URI clients know for ``server``'s ``uri`` (the wrapper when it collides)."""
        for downstream, target in self._uris.items():
            if target == (server, uri):
                return downstream
        return uri

    def template_server(self, uri_template: str) -> str:
        """The server that lists ``uri_template`` (raises :class:`ToolNotFound`)."""
        server = self._template_servers.get(uri_template)
        if server is None:
            close = get_close_matches(uri_template, self._template_servers, n=3, cutoff=0.5)
            raise ToolNotFound(uri_template, close, kind="resource template")
        return server


def build_surface(guard: Guard, separator: str = DEFAULT_SEPARATOR) -> Surface:
    """The downstream view of everything ``guard`` lets through.

    Raises:
        NameCollision: two tools (or prompts) would go out under one name.
    """
    tools = [t for t in guard.tools() if not t.synthetic]
    tool_names = NameTable([t.name for t in tools], "mcp", separator=separator)
    prompts = guard.prompts()
    prompt_names = NameTable([p.name for p in prompts], "mcp", separator=separator, kind="prompt")
    listed = guard.resources()
    resources, uris = _resources([r for r in listed if not r.template])
    templates = [r for r in listed if r.template]
    return Surface(
        tools=[_tool(t, tool_names.to_provider(t.name)) for t in tools],
        tool_names=tool_names,
        prompts=[_prompt(p, prompt_names.to_provider(p.name)) for p in prompts],
        prompt_names=prompt_names,
        resources=resources,
        templates=[_template(t) for t in templates],
        _tools={t.name: t for t in tools},
        _prompts={p.name: p for p in prompts},
        _uris=uris,
        _template_servers={t.uri: t.server for t in templates},
    )


def _tool(info: ToolInfo, name: str) -> types.Tool:
    return info.definition.model_copy(update={"name": name})


def _prompt(info: PromptInfo, name: str) -> types.Prompt:
    arguments = [types.PromptArgument(name=arg, required=required) for arg, required in info.arguments]
    return types.Prompt(name=name, description=info.description or None, arguments=arguments or None)


def _resources(listed: list[ResourceInfo]) -> tuple[list[types.Resource], dict[str, tuple[str, str]]]:
    counts = Counter(r.uri for r in listed)
    resources: list[types.Resource] = []
    uris: dict[str, tuple[str, str]] = {}
    for info in listed:
        uri = info.uri if counts[info.uri] == 1 else f"{_WRAP_PREFIX}{info.server}/{quote(info.uri, safe='')}"
        uris[uri] = (info.server, info.uri)
        resources.append(
            types.Resource(uri=uri, name=info.name, description=info.description or None, mime_type=info.mime_type)
        )
    return resources, uris


def _template(info: ResourceInfo) -> types.ResourceTemplate:
    return types.ResourceTemplate(
        uri_template=info.uri, name=info.name, description=info.description or None, mime_type=info.mime_type
    )


def _template_matches(template: str, uri: str) -> bool:
    literal = template.partition("{")[0]
    return bool(literal) and uri.startswith(literal)
