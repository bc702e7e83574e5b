"""``mcpmux completion bash|zsh|fish``: a shell completion script, and the completers it calls.

Install with ``eval "$(mcpmux completion bash)"`` (or ``zsh``), or
``mcpmux completion fish > ~/.config/fish/completions/mcpmux.fish``. The script calls back into
``mcpmux`` with ``_MCPMUX_COMPLETE`` set (click's machinery). Server names come from the
configuration, tool names from the catalog cache: completing never starts a server.
"""

from __future__ import annotations

import logging

import click
from click.shell_completion import CompletionItem, get_completion_class

from mcpmux.errors import MCPMuxError

__all__ = [
    "COMPLETE_VAR",
    "complete_hosts",
    "complete_prompts",
    "complete_servers",
    "complete_tools",
    "completion_cmd",
    "server_names",
]

COMPLETE_VAR = "_MCPMUX_COMPLETE"
SHELLS = ("bash", "zsh", "fish")

logger = logging.getLogger(__name__)


def _config_path(ctx: click.Context) -> str | None:
    root = ctx.find_root()
    obj = root.obj
    if obj is not None and getattr(obj, "config_path", None):
        return str(obj.config_path)
    value = root.params.get("config_path")
    return str(value) if value else None


def server_names(ctx: click.Context) -> list[str]:
    """The configured server names, or none when the configuration cannot be loaded."""
    from mcpmux.config import load_config

    try:
        return [s.name for s in load_config(_config_path(ctx)).servers]
    except MCPMuxError as exc:
        # A shell completer has nowhere to report: offer nothing and leave a trace for -vv.
        logger.debug("no server names to complete: %s", exc)
        return []


def complete_servers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for a SERVER argument."""
    return [CompletionItem(n) for n in server_names(ctx) if n.startswith(incomplete)]


def complete_tools(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for a SERVER:TOOL argument: canonical names from the catalog cache."""
    return _cached(ctx, incomplete, prompts=False)


def complete_prompts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for a SERVER:PROMPT argument: canonical names from the catalog cache."""
    return _cached(ctx, incomplete, prompts=True)


def complete_hosts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for ``import --from``: the known hosts, else a file name."""
    from mcpmux.config.hosts import HOSTS

    hosts = [CompletionItem(h) for h in sorted(HOSTS) if h.startswith(incomplete)]
    return hosts or [CompletionItem(incomplete, type="file")]


def _cached(ctx: click.Context, incomplete: str, *, prompts: bool) -> list[CompletionItem]:
    from mcpmux.cli.fast_list import cached_tool_names
    from mcpmux.config import load_config

    try:
        names = cached_tool_names(load_config(_config_path(ctx)), prompts=prompts)
    except MCPMuxError as exc:
        logger.debug("no names to complete: %s", exc)
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish)."""
    completer = get_completion_class(shell)
    assert completer is not None  # every name in SHELLS is one of click's
    root = click.get_current_context().find_root().command
    click.echo(completer(root, {}, "mcpmux", COMPLETE_VAR).source())
