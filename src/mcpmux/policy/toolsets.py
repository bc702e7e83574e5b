"""Toolsets: which tools, resources and prompts one view of the host exposes (``toolsets:`` in the config).

A toolset is a filter the guard applies to listing *and* to every verb: a tool outside it is not
listed, and calling it by name is refused exactly like a tool the rules deny
(:class:`~mcpmux.errors.ToolDenied`, audited as ``denied``). A face gets such a view with
:meth:`~mcpmux.policy.Guard.with_toolset`.

Patterns are globs over the canonical names the rules use (``server:tool``, ``server:prompt``) and
over ``SERVER:URI`` for resources (the configured server name). They are compared case-sensitively,
character for character: ``FS:*`` does not match ``fs:read``, and a look-alike letter matches only
itself. ``*`` matches ``:`` too, so ``f*`` covers every server whose name starts with ``f``: write
``fs:*`` to mean one server.

A server configured with an empty ``prefix`` lists bare names, and a bare name may itself contain
``:`` (a server may call a tool ``fs:read_secret``). Such tools are matched as ``SERVER:TOOL`` (the
configured server name) and never by their bare name, so no server can slip a tool into another
server's patterns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from mcpmux.config.models import Config, DiscoveryConfig, ToolsetConfig
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.types.models import PromptInfo, ToolInfo

__all__ = ["EXPOSE_NAME", "Toolset", "toolset_named"]

EXPOSE_NAME = "--expose"
"""The name of the toolset ``serve --expose`` makes (no configured toolset can have it: names are words)."""


@dataclass(frozen=True, slots=True)
class Toolset:
    """A compiled ``toolsets.NAME`` entry: what it exposes, and how its tools are discovered."""

    name: str
    tools: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    discovery: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    description: str | None = None

    @classmethod
    def of(cls, name: str, entry: ToolsetConfig, default_discovery: DiscoveryConfig) -> Toolset:
        """The toolset ``name`` of the configuration (its own ``discovery`` or the global one)."""
        discovery = entry.discovery if entry.discovery is not None else default_discovery
        return cls(name, entry.tools, entry.resources, entry.prompts, discovery, entry.description)

    @classmethod
    def exposing(cls, patterns: tuple[str, ...], discovery: DiscoveryConfig) -> Toolset:
        """``mcpmux serve --expose GLOB...``: the tools, prompts and resources (``SERVER:URI``) matching them."""
        return cls(EXPOSE_NAME, patterns, patterns, patterns, discovery, "what --expose names")

    @property
    def rule(self) -> str:
        """The rule a refusal names (as the allow/deny rules name theirs)."""
        if self.name == EXPOSE_NAME:
            return f"--expose {' '.join(self.tools)} (no pattern matches)"
        return f"toolsets.{self.name} (no pattern matches)"

    def has_tool(self, tool: ToolInfo) -> bool:
        """Whether ``tool`` (by canonical name, or ``SERVER:TOOL`` when it has no namespace) is in this toolset."""
        return _matches(_subject(tool.name, tool.server, tool.tool), self.tools)

    def has_prompt(self, prompt: PromptInfo) -> bool:
        """Whether ``prompt`` (by canonical name, or ``SERVER:PROMPT`` when it has no namespace) is in this toolset."""
        return _matches(_subject(prompt.name, prompt.server, prompt.prompt), self.prompts)

    def has_resource(self, server: str, uri: str) -> bool:
        """Whether ``uri`` of ``server`` (a resource, a template, or a URI read through one) is in this toolset."""
        return _matches(f"{server}:{uri}", self.resources)


def _subject(name: str, server: str, bare: str) -> str:
    # A canonical name equal to the bare name has no namespace: the server's name stands in for it.
    return f"{server}:{bare}" if name == bare else name


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def toolset_named(config: Config, name: str) -> Toolset:
    """The toolset ``name`` of ``config``.

    Raises:
        ConfigError: no toolset has that name (the known ones are listed).
    """
    entry = config.toolsets.get(name)
    if entry is None:
        known = ", ".join(sorted(config.toolsets)) or "none are configured"
        raise ConfigError(ConfigProblem("<cli>", "toolset", f"unknown toolset {name!r} (known: {known})"))
    return Toolset.of(name, entry, config.discovery)
