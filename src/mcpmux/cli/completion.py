"""``mcpmux completion bash|zsh|fish``: a shell completion script, and the completers it calls.

Install with ``eval "$(mcpmux completion bash)"`` (or ``zsh``), or
``mcpmux completion fish > ~/.config/fish/completions/mcpmux.fish``. The script calls back into
``mcpmux`` with ``_MCPMUX_COMPLETE`` set (click's machinery). Server names come from the
configuration, tool names from the catalog cache: completing never starts a server.
"""

from __future__ import annotations

import logging
import os

import click
from click.shell_completion import (
    BashComplete,
    CompletionItem,
    add_completion_class,
    get_completion_class,
    split_arg_string,
)

from mcpmux.cli.main import COMPLETE_VAR
from mcpmux.errors import MCPMuxError

__all__ = [
    "COMPLETE_VAR",
    "ColonBashComplete",
    "complete_hosts",
    "complete_prompts",
    "complete_servers",
    "complete_servers_or_tools",
    "complete_tools",
    "completion_cmd",
    "server_names",
]

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


def complete_servers_or_tools(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """``shell_complete=`` for ``tools [SERVER | SERVER:TOOL]``: server names, then tool names after a colon."""
    if ":" in incomplete:
        return complete_tools(ctx, param, incomplete)
    return complete_servers(ctx, param, incomplete)


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


# click's bash script, plus the line, cursor and word breaks, so that names with a colon complete.
_SOURCE_BASH = """\
%(complete_func)s() {
    local IFS=$'\\n'
    local response

    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD \
COMP_LINE="$COMP_LINE" COMP_POINT=$COMP_POINT COMP_WORDBREAKS="$COMP_WORDBREAKS" \
%(complete_var)s=bash_complete $1)

    for completion in $response; do
        IFS=',' read type value <<< "$completion"

        if [[ $type == 'dir' ]]; then
            COMPREPLY=()
            compopt -o dirnames
        elif [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'plain' ]]; then
            COMPREPLY+=($value)
        fi
    done

    return 0
}

%(complete_func)s_setup() {
    complete -o nosort -F %(complete_func)s %(prog_name)s
}

%(complete_func)s_setup;
"""


class ColonBashComplete(BashComplete):
    """Bash completion that completes ``server:tool`` although bash breaks words at ``:``.

    Bash splits ``fs:re`` into ``fs``, ``:``, ``re`` (``:`` is in ``COMP_WORDBREAKS``) and replaces
    only the text after the last break character. So the word is read from ``COMP_LINE`` up to the
    cursor, and each candidate is given back without the part bash keeps (as bash-completion's
    ``__ltrim_colon_completions`` does).
    """

    source_template = _SOURCE_BASH
    _kept = ""

    def get_completion_args(self) -> tuple[list[str], str]:
        line = os.environ.get("COMP_LINE")
        if line is None:  # an older script: click's own protocol
            return super().get_completion_args()
        point = int(os.environ.get("COMP_POINT", len(line)))
        before = line[:point]
        words = split_arg_string(before)
        incomplete = "" if not before or before[-1].isspace() or not words else words.pop()
        self._kept = _kept_prefix(incomplete, os.environ.get("COMP_WORDBREAKS", ""))
        return words[1:], incomplete

    def format_completion(self, item: CompletionItem) -> str:
        kept = self._kept
        value = item.value[len(kept) :] if kept and item.value.startswith(kept) else item.value
        return f"{item.type},{value}"


def _kept_prefix(incomplete: str, wordbreaks: str) -> str:
    """The part of ``incomplete`` bash keeps: up to its last word-break character (``:``, ``=``)."""
    breaks = set(wordbreaks) - set(" \t\n\"'")
    cut = max((incomplete.rfind(c) for c in breaks), default=-1)
    return incomplete[: cut + 1]


add_completion_class(ColonBashComplete, "bash")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_cmd(shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish)."""
    completer = get_completion_class(shell)
    assert completer is not None  # every name in SHELLS is one of click's
    root = click.get_current_context().find_root().command
    click.echo(completer(root, {}, "mcpmux", COMPLETE_VAR).source())
