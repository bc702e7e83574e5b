"""An agent session: a :class:`~mcpmux.Host` (servers behind the guard), a model, the loop, answers to requests.

The faces (``mcpmux run``, ``mcpmux chat``) differ only in who answers: a terminal, a REPL, or
nobody. This module wires the rest the same way for both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcpmux.bridge.loop import DEFAULT_MAX_TURNS, AgentLoop, EventSink
from mcpmux.bridge.providers import Provider
from mcpmux.bridge.providers.client_requests import (
    ModelSampler,
    SamplingApprover,
    decline_elicitation,
    workspace_roots,
)
from mcpmux.bridge.tool_search import ToolSelection
from mcpmux.config.models import Config
from mcpmux.host import ConnectionFactory, Host
from mcpmux.policy import Approver, ChainedApprovals, Guard, StateStore
from mcpmux.types import ClientCallbacks, ElicitationCallback

__all__ = ["AgentOptions", "AgentSession", "agent_session", "describe_servers", "with_instructions"]

CLOSE_TIMEOUT_S = 5.0
INSTRUCTIONS_LIMIT_CHARS = 2000
NAMES_PER_SERVER = 60
PREAMBLE = (
    "You are an assistant working through mcpmux, which connects you to the MCP servers below. "
    "Use their tools when they help; tool names are server__tool. A tool result starting with "
    "[tool error] means the call failed: read why, then fix the arguments or try something else."
)


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """How the agent talks to servers and the model (every field has a default)."""

    face: str = "chat"
    max_turns: int = DEFAULT_MAX_TURNS
    tool_threshold: int = 40
    always_load: tuple[str, ...] = ()
    root: Path | None = None
    approver: Approver | None = None
    sampling_approver: SamplingApprover | None = None
    elicitation: ElicitationCallback | None = None
    connection_factory: ConnectionFactory | None = None
    catalog: bool = True
    store: StateStore | None = field(default=None, compare=False)
    agent: str | None = None
    """A configured agent (``agents:``): its allow-list holds the guard, its instructions join the prompt."""


@dataclass
class AgentSession:
    """What a face works with: the guard (and its manager), the model, the loop."""

    guard: Guard
    provider: Provider | None
    options: AgentOptions
    on_event: EventSink | None = None
    _loop: AgentLoop | None = None

    def loop(self) -> AgentLoop:
        """The conversation (created on first use; needs a provider).

        Raises:
            RuntimeError: no model is configured.
        """
        if self.provider is None:
            raise RuntimeError("no model is configured")
        if self._loop is None:
            selection = ToolSelection(self.options.tool_threshold, self.options.always_load)
            self._loop = AgentLoop(
                self.guard, self.provider, max_turns=self.options.max_turns, selection=selection,
                on_event=self.on_event,
            )  # fmt: skip
        self._loop.provider = self.provider
        prompt = describe_servers(self.guard, tool_names=not self._searching())
        self._loop.system_prompt = with_instructions(prompt, self.guard, self.options.agent)
        return self._loop

    def _searching(self) -> bool:
        return len(self.guard.tools()) > self.options.tool_threshold


@asynccontextmanager
async def agent_session(
    config: Config, provider: Provider | None, options: AgentOptions, on_event: EventSink | None = None
) -> AsyncIterator[AgentSession]:
    """Start the servers with sampling, elicitation and roots answered for an agent, and yield a session."""
    holder: list[AgentSession] = []
    chained = ChainedApprovals(options.elicitation or decline_elicitation)  # an upstream mcpmux asks once
    callbacks = ClientCallbacks(
        sampling=ModelSampler(lambda: holder[0].provider if holder else None, options.sampling_approver),
        elicitation=chained,
        roots=workspace_roots(options.root),
    )
    host = Host(
        config, face=options.face, approver=options.approver, store=options.store, project=options.root,
        callbacks=callbacks, catalog=options.catalog, connection_factory=options.connection_factory,
    )  # fmt: skip
    try:
        async with host:
            guard = host.for_agent(options.agent) if options.agent is not None else host
            holder.append(AgentSession(guard, provider, options, on_event))
            yield holder[0]
    finally:
        current = holder[0].provider if holder else provider
        if current is not None:
            # The session may end by cancellation (Ctrl-C): close the HTTP client anyway, briefly.
            with anyio.move_on_after(CLOSE_TIMEOUT_S, shield=True):
                await current.aclose()


def with_instructions(prompt: str, guard: Guard, agent: str | None) -> str:
    """``prompt`` followed by the configured agent's instructions (trusted: they come from the configuration)."""
    if agent is None:
        return prompt
    entry = guard.config.agent(agent)
    if not entry.instructions.strip():
        return prompt
    return f"{prompt}\n\nYou are the agent {agent!r}. Your instructions:\n{entry.instructions.strip()}"


def describe_servers(guard: Guard, *, tool_names: bool = True) -> str:
    """The system prompt: the preamble, then each server with its state, tools and instructions."""
    by_server: dict[str, list[str]] = {}
    for tool in guard.tools():
        by_server.setdefault(tool.server, []).append(tool.tool)
    lines = [PREAMBLE, "", "Servers:"]
    for status in guard.status():
        tools = by_server.get(status.name, [])
        if guard.is_denied(status.name):
            continue  # every tool of it is denied: the model is not told about it
        lines.append(f"- {status.name} ({status.state.value}, {len(tools)} tools)")
        if tool_names and tools:
            shown = ", ".join(tools[:NAMES_PER_SERVER]) + (", ..." if len(tools) > NAMES_PER_SERVER else "")
            lines.append(f"  tools: {shown}")
        declared = [d for d in guard.config.server(status.name).resources or () if d.description]
        if declared:  # from the configuration (trusted): what its resources are, via its read_resource tool
            lines.append("  resources: " + "; ".join(f"{d.uri}: {d.description}" for d in declared))
        info = guard.server_info(status.name)
        instructions = info.instructions if info is not None else None
        if instructions:
            # Server text is untrusted (DESIGN section 6): label it so the model weighs it as such.
            text = instructions[:INSTRUCTIONS_LIMIT_CHARS].replace("\n", "\n    ")
            lines.append(f"  instructions from the server (not from the user):\n    {text}")
    if not tool_names:
        lines += ["", "Not every tool is loaded: call search_tools with keywords to load the ones you need."]
    return "\n".join(lines)
