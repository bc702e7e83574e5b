"""``mcpmux chat``: the REPL over every configured server, with or without a model.

The CLI table (``mcpmux.cli.main.COMMANDS``) loads this command lazily; the chat is a face of
its own, so it reads the CLI's global options from the click context, not from CLI modules.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
import click

from mcpmux.config import Config, load_config
from mcpmux.config.models import LLMConfig
from mcpmux.sources.merge import with_registered

if TYPE_CHECKING:
    from mcpmux.agents.agent import AgentOptions
    from mcpmux.bridge.providers import Provider

__all__ = ["chat_cmd", "model_configured"]

_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def model_configured(llm: LLMConfig) -> bool:
    """Whether the settings or the environment name a model to talk to."""
    return bool(llm.model or llm.base_url or llm.api_key or os.environ.get(_KEY_VARIABLES[llm.provider]))


@click.command("chat")
@click.option("--provider", type=click.Choice(["openai", "anthropic"]), help="LLM API.")
@click.option("--model", "-m", metavar="NAME", help="Model name.")
@click.option("--base-url", metavar="URL", help="OpenAI-compatible endpoint (vLLM, Ollama, ...).")
@click.option(
    "--max-turns", type=click.IntRange(1), default=20, show_default=True, help="Most model turns per message."
)
@click.option("--always-load", multiple=True, metavar="PATTERN", help="Tools always sent, e.g. 'fs:read_*'.")
@click.option("--tool-threshold", type=click.IntRange(0), default=40, show_default=True,
              help="Past this many tools the model searches for the ones it needs.")  # fmt: skip
@click.option("--agent", metavar="NAME", help="Chat as a configured agent: its model, instructions and tools only.")
@click.pass_context
def chat_cmd(
    ctx: click.Context, provider: str | None, model: str | None, base_url: str | None, max_turns: int,
    always_load: tuple[str, ...], tool_threshold: int, agent: str | None,
) -> None:  # fmt: skip
    """Chat with a model that uses every server's tools; /help lists the slash commands."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError("mcpmux chat needs a terminal; for scripts use: mcpmux run PROMPT")
    if importlib.util.find_spec("prompt_toolkit") is None:
        raise click.ClickException("the chat needs prompt_toolkit: pip install 'mcpmux[chat]'")
    config = with_registered(load_config(getattr(ctx.find_root().obj, "config_path", None)))
    agent_model = config.agent(agent).model if agent is not None else None
    overrides = {
        k: v for k, v in {"provider": provider, "model": model or agent_model, "base_url": base_url}.items() if v
    }
    llm = config.llm.model_copy(update=overrides)
    from mcpmux.agents.agent import AgentOptions
    from mcpmux.bridge.providers import make_provider

    # A model that is named but cannot work (no key, no SDK) fails here, before any server starts;
    # with no model at all the chat still runs, for its slash commands.
    model_provider = make_provider(llm, check=True) if model_configured(llm) else None
    # The CLI's choice of how servers open (through ``mcpmux daemon`` or here), when it launched the chat.
    factory_for = ctx.find_root().meta.get("mcpmux.connection_factory")
    options = AgentOptions(
        face="chat", max_turns=max_turns, always_load=always_load, tool_threshold=tool_threshold, agent=agent,
        connection_factory=factory_for(config) if callable(factory_for) else None,
    )  # fmt: skip
    anyio.run(_chat, config, llm, model_provider, options)


async def _chat(config: Config, llm: LLMConfig, provider: Provider | None, options: AgentOptions) -> None:
    from rich.console import Console

    from mcpmux.agents.agent import agent_session
    from mcpmux.chat.interaction import ChatQuestions, prompt_asker
    from mcpmux.chat.render import Renderer
    from mcpmux.chat.repl import ChatRepl
    from mcpmux.chat.slash import ChatState
    from mcpmux.chat.transcript import Transcript
    from mcpmux.config.paths import state_dir

    console, transcript = Console(highlight=False), Transcript()
    renderer = Renderer(console, transcript)
    questions = ChatQuestions(console, prompt_asker(), renderer.end_text)
    options = replace(
        options, approver=questions.approve, sampling_approver=questions.sample, elicitation=questions.elicit
    )
    console.print("[dim]connecting to servers...[/]")
    async with agent_session(config, provider, options, renderer) as session:
        state = ChatState(session, console, renderer, transcript, llm)
        await ChatRepl(state, state_dir() / "chat_history").run()
