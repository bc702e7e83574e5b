"""An allow-list a guard is held to: an agent's tools (``agents: {NAME: {tools | toolset}}``).

A scoped guard (:meth:`~mcpmux.policy.Guard.for_agent`) lists only the tools whose canonical name
matches one of the scope's globs, and refuses any other call (tools, resource reads, prompts) as
the rules refuse a denied tool: :class:`~mcpmux.errors.ToolDenied`, audited as ``denied``. So an
agent's loop cannot reach a tool outside its allow-list even when the model names one it was
never shown (a prompt-injected tool result asking for another tool, say).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from mcpmux.config.models import AgentConfig, Config
from mcpmux.errors import UsageError
from mcpmux.types.models import ToolInfo

__all__ = ["ToolScope", "agent_scope"]


@dataclass(frozen=True, slots=True)
class ToolScope:
    """Canonical-name globs (``fs:read_*``) a guard is held to, and whom it holds (for the audit)."""

    label: str
    caller: str
    patterns: tuple[str, ...]
    excluded: tuple[str, ...] = ()
    """Names never admitted, whatever the patterns say (an agent's own ``ask_NAME``)."""

    def admits(self, tool: ToolInfo) -> bool:
        """Whether ``tool``'s canonical name matches one of the patterns (and is not excluded)."""
        if tool.name in self.excluded:
            return False
        return any(fnmatchcase(tool.name, pattern) for pattern in self.patterns)

    @property
    def rule(self) -> str:
        """What the audit row and the refusal say."""
        return f"{self.label}: not in its tools ({', '.join(self.patterns)})"


def agent_scope(config: Config, agent: AgentConfig) -> ToolScope:
    """The scope of ``agent``: its ``tools`` globs, or the ``tools`` of its ``toolset``.

    Raises:
        UsageError: its toolset is not in the configuration.
    """
    patterns = agent.tools if agent.tools is not None else _toolset_tools(config, agent)
    return ToolScope(f"agent {agent.name!r}", f"agent:{agent.name}", tuple(patterns))


def _toolset_tools(config: Config, agent: AgentConfig) -> tuple[str, ...]:
    # Hook for the toolsets section (issue 22, part A): a toolset is found by name in the
    # configuration's ``toolsets`` (a mapping of name to entry, or entries with a ``name``) and
    # its ``tools`` globs are the agent's allow-list.
    toolsets = getattr(config, "toolsets", None)
    name = agent.toolset
    if isinstance(toolsets, Mapping):
        entry = toolsets.get(name)
    else:
        entry = next((t for t in toolsets or () if getattr(t, "name", None) == name), None)
    if entry is None:
        raise UsageError(
            f"agent {agent.name!r} uses toolset {name!r}, which is not configured",
            hint="define it under toolsets: or give the agent tools: [globs]",
        )
    tools = entry.get("tools") if isinstance(entry, Mapping) else getattr(entry, "tools", None)
    return tuple(tools or ())
