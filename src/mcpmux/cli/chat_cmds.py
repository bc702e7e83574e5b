"""``mcpmux run "PROMPT"``: one conversation turn with the model and every server, non-interactive.

The answer streams to stdout as it arrives; tool calls are reported on stderr. With ``--json``,
stdout gets one JSON transcript at the end instead. A call that needs approval, or a server's
sampling request, is asked on the terminal when there is one and refused otherwise; elicitation
is always declined (nobody can fill in a form).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import click

from mcpmux.cli.host_cmds import run
from mcpmux.cli.output import command_config, json_option, state
from mcpmux.config import Config
from mcpmux.errors import EXIT_FAILED, EXIT_OK
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    import mcp_types as types

    from mcpmux.bridge.loop import LoopEvent, LoopResult
    from mcpmux.bridge.providers.client_requests import SamplingApprover

__all__ = ["model_options", "run_cmd"]

F = TypeVar("F", bound=Callable[..., Any])
PREVIEW_CHARS = 160


def model_options(func: F) -> F:
    """``--provider``, ``--model``, ``--base-url``, ``--max-turns`` (override the ``llm:`` section)."""
    func = click.option("--max-turns", type=click.IntRange(1), default=20, show_default=True,
                        help="Most model turns for one prompt.")(func)  # fmt: skip
    func = click.option("--base-url", metavar="URL", help="OpenAI-compatible endpoint (vLLM, Ollama, ...).")(func)
    func = click.option("--model", "-m", metavar="NAME", help="Model name.")(func)
    return click.option("--provider", type=click.Choice(["openai", "anthropic"]), help="LLM API.")(func)


@click.command("run")
@click.argument("prompt")
@model_options
@click.option("--always-load", multiple=True, metavar="PATTERN", help="Tools always sent, e.g. 'fs:read_*'.")
@click.option("--tool-threshold", type=click.IntRange(0), default=40, show_default=True,
              help="Past this many tools the model searches for the ones it needs.")  # fmt: skip
@click.option("--agent", metavar="NAME", help="Run as a configured agent: its model, instructions and tools only.")
@json_option
def run_cmd(
    prompt: str, provider: str | None, model: str | None, base_url: str | None, max_turns: int,
    always_load: tuple[str, ...], tool_threshold: int, agent: str | None,
) -> int:  # fmt: skip
    """Send PROMPT to the model with every server's tools; print the answer (exit 1 if it failed)."""
    from mcpmux.bridge.providers import make_provider

    configured = command_config()
    agent_model = configured.agent(agent).model if agent is not None else None  # an unknown agent: exit 2
    chosen = {"provider": provider, "model": model or agent_model, "base_url": base_url}
    overrides = {k: v for k, v in chosen.items() if v}
    as_json = bool(state().json)
    # The model settings are checked before any server starts: a missing key fails at once.
    llm = make_provider(configured.llm.model_copy(update=overrides), check=True)

    async def body(config: Config) -> LoopResult:
        from mcpmux.agents.agent import AgentOptions, agent_session
        from mcpmux.cli.approval import terminal_approver
        from mcpmux.cli.connecting import daemon_factory

        interactive = sys.stdin.isatty() and sys.stderr.isatty()
        options = AgentOptions(
            face="cli", max_turns=max_turns, always_load=always_load, tool_threshold=tool_threshold,
            approver=terminal_approver(),
            sampling_approver=_ask_sampling() if interactive else None, agent=agent,
            connection_factory=daemon_factory(config),
        )  # fmt: skip
        async with agent_session(config, llm, options, _show(as_json)) as session:
            loop = session.loop()
            result = await loop.send(prompt)
            if as_json:
                click.echo(json.dumps(_transcript(prompt, result, loop.messages, llm.model), indent=2, default=str))
            return result

    result = run(body)
    if not as_json:
        click.echo()
        sys.stderr.write(f"tokens: {result.usage.prompt_tokens} in, {result.usage.completion_tokens} out\n")
    if result.stopped != "answered":
        sys.stderr.write(f"Error: no answer after {result.turns} model turns (--max-turns)\n")
        return EXIT_FAILED
    return EXIT_OK


def _show(as_json: bool) -> Callable[[LoopEvent], Any]:
    from mcpmux.bridge.loop import TextDelta, ToolFinished, ToolStarted

    async def show(event: LoopEvent) -> None:
        if isinstance(event, TextDelta) and not as_json:
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ToolStarted):
            sys.stderr.write(
                f"-> {event.canonical} {json.dumps(event.arguments, ensure_ascii=False)[:PREVIEW_CHARS]}\n"
            )
        elif isinstance(event, ToolFinished):
            text = event.result.as_text().replace("\n", " ")[:PREVIEW_CHARS]
            status = "error" if event.result.is_error else "ok"
            sys.stderr.write(f"<- {event.canonical} {status} {event.duration_s:.2f}s: {text}\n")

    return show


def _transcript(prompt: str, result: LoopResult, messages: list[JSONObject], model: str) -> JSONObject:
    return {
        "prompt": prompt, "model": model, "answer": result.text, "stopped": result.stopped, "turns": result.turns,
        "tool_calls": result.tool_calls, "errors": list(result.errors),
        "usage": {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens},
        "messages": messages,
    }  # fmt: skip


def _ask_sampling() -> SamplingApprover:
    from mcpmux.bridge.providers.client_requests import describe_sampling

    lock = anyio.Lock()

    def ask(text: str) -> bool:
        sys.stderr.write(f"\nmcpmux: {text}\nLet the model answer? [y/N]: ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    async def approve(server: str, params: types.CreateMessageRequestParams) -> bool:
        async with lock:
            return await anyio.to_thread.run_sync(ask, describe_sampling(server, params))

    return approve
