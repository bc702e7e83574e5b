"""An agent served as an MCP tool: ``ask_NAME(task)`` runs the agent's tool loop and answers.

::

    tools = AgentTools(host)
    await tools.install(["reviewer"])        # the host now has "agents:ask_reviewer"
    ask = tools.function("reviewer")         # or the bare function, for a toolset entry ``agent: NAME``

The loop runs over the agent's tools only (:meth:`~mcpmux.policy.Guard.for_agent`: a call outside
its allow-list is refused like a denied tool, and audited as ``agent:NAME``), with the agent's
instructions, and the model of the configuration (``agents.NAME.model``, else ``llm.model``) or,
when none is configured, the calling client's own model through sampling
(:class:`~mcpmux.bridge.providers.sampling.SamplingProvider`).

Recursion is bounded twice: an agent never sees its own ``ask_NAME`` (excluded from its scope, so
a call of it is refused), and at most :data:`MAX_ACTIVE_ASKS` asks run at once in one host (agents
asking each other in a circle stop there, with a tool error that says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from mcpmux.agents.agent import describe_servers, with_instructions
from mcpmux.bridge.loop import AgentLoop
from mcpmux.bridge.providers import Provider, make_provider
from mcpmux.bridge.providers.sampling import SamplingProvider
from mcpmux.config.models import AgentConfig, Config
from mcpmux.errors import MCPMuxError
from mcpmux.host import Host
from mcpmux.policy import Guard

__all__ = ["AGENTS_SERVER", "MAX_ACTIVE_ASKS", "AgentTools", "ask_tool_name", "configured_model"]

AGENTS_SERVER = "agents"
MAX_ACTIVE_ASKS = 4
"""Asks running at once in one host; past it an ask is refused (bounds agents asking each other)."""

ProviderFactory = Callable[[Config, AgentConfig], Provider | None]


def ask_tool_name(agent: str) -> str:
    """The tool an agent is served as: ``ask_NAME``."""
    return f"ask_{agent.replace('-', '_')}"


def configured_model(config: Config, agent: AgentConfig) -> Provider | None:
    """The agent's model from the configuration (its ``model``, else ``llm:``), or ``None`` if none is named."""
    if not (agent.model or config.llm.model or config.llm.base_url):
        return None
    update = {"model": agent.model} if agent.model else {}
    return make_provider(config.llm.model_copy(update=update), check=True)


class AgentTools:
    """Builds the ``ask_NAME`` tools of a host's configured agents.

    Args:
        host: the host whose tools the agents use (its rules, pins, approval and audit apply).
        server: the in-process server the tools are added to.
        provider: the model of an agent (``None``: sample the calling client); the configuration's
            by default (:func:`configured_model`).
    """

    def __init__(
        self, host: Host, *, server: str = AGENTS_SERVER, provider: ProviderFactory = configured_model
    ) -> None:
        self.host, self.server, self._provider = host, server, provider
        self._active = 0

    async def install(self, agents: Sequence[str]) -> list[str]:
        """Add ``ask_NAME`` for each agent to the host (one in-process server); return the canonical names.

        Raises:
            UsageError: an unknown agent or toolset.
        """
        functions = [self.function(name) for name in agents]
        await self.host.add_tools(functions, server=self.server)
        return [f"{self.server}:{ask_tool_name(name)}" for name in agents]

    def function(self, agent: str) -> Callable[[str, Context], Awaitable[str]]:
        """The ``ask_NAME(task)`` function of ``agent``, ready for :meth:`Host.add_tools` or a toolset.

        Raises:
            UsageError: no such agent, or its toolset is not configured.
        """
        entry = self.host.config.agent(agent)
        self.host.for_agent(entry)  # its allow-list resolves now, not at the first call

        async def ask(task: str, ctx: Context) -> str:
            return await self._ask(entry, task, ctx)

        ask.__name__ = ask.__qualname__ = ask_tool_name(agent)
        ask.__doc__ = _describe(entry)
        return ask

    async def _ask(self, agent: AgentConfig, task: str, ctx: Context) -> str:
        if self._active >= MAX_ACTIVE_ASKS:
            raise ToolError(
                f"agent {agent.name!r} not asked: {MAX_ACTIVE_ASKS} asks are running already "
                "(agents asking each other in a circle stop here)"
            )
        self._active += 1
        try:
            return await self._run(agent, task, ctx)
        finally:
            self._active -= 1

    def guard(self, agent: AgentConfig | str) -> Guard:
        """The guard ``agent``'s loop calls through: its allow-list, minus its own ``ask_NAME``."""
        guard = self.host.for_agent(agent)
        assert guard.scope is not None
        name = agent if isinstance(agent, str) else agent.name
        own = f"{self.server}:{ask_tool_name(name)}"
        return guard.scoped(dataclasses.replace(guard.scope, excluded=(*guard.scope.excluded, own)))

    async def _run(self, agent: AgentConfig, task: str, ctx: Context) -> str:
        # A stdio gateway answers before its upstreams connect: the agent waits for its servers'
        # first attempts (bounded by the host), or it would start with no tools at all.
        await self.host.wait_started()
        guard = self.guard(agent)
        configured = self._provider(self.host.config, agent)
        try:
            provider = configured or SamplingProvider(ctx.session)
            prompt = with_instructions(describe_servers(guard), guard, agent.name)
            loop = AgentLoop(guard, provider, system_prompt=prompt, max_turns=agent.max_turns)
            result = await loop.send(task)
        except MCPMuxError as exc:
            raise ToolError(f"agent {agent.name!r} failed: {exc}") from exc
        finally:
            if configured is not None:
                await configured.aclose()
        if result.stopped != "answered":
            raise ToolError(
                f"agent {agent.name!r} gave no answer in {agent.max_turns} model turns (agents.{agent.name}.max_turns)"
            )
        return result.text


def _describe(agent: AgentConfig) -> str:
    """The tool's description (the ``task`` parameter is described by the function's docstring)."""
    head = agent.description or f"Ask the agent {agent.name!r} to carry out a task with its tools and answer."
    return f"{head}\n\nArgs:\n    task: what the agent should do, in plain words.\n"
