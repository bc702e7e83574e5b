"""The ``mcpmux`` command: global options, lazily loaded subcommands, one error boundary.

Subcommands live in their own modules and are imported only when invoked, so ``mcpmux --help``
and ``mcpmux --version`` never import the MCP SDK (about 0.5 s on its own).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click

from mcpmux._version import __version__
from mcpmux.cli.output import CliState, masked_output
from mcpmux.errors import EXIT_INTERRUPTED, EXIT_USAGE, MCPMuxError, exit_code_for

__all__ = ["COMPLETE_VAR", "CliState", "cli", "main"]

COMPLETE_VAR = "_MCPMUX_COMPLETE"
"""Set by the shell completion scripts (click's protocol; its default name for ``mcpmux``)."""

# name -> (module, attribute, one-line help). The help text lives here so `--help` imports nothing.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "add": ("mcpmux.cli.entry_cmds", "add_cmd", "Add a server: NAME -- COMMAND [ARGS]... or NAME -t TYPE URL."),
    "add-json": ("mcpmux.cli.entry_cmds", "add_json_cmd", "Add a server from a Claude-style JSON object."),
    "api": ("mcpmux.cli.api_cmd", "api_cmd", "Serve the REST API: sources, tools, execute, servers, audit."),
    "approve": ("mcpmux.cli.guard_cmds", "approve_cmd", "Approve held-back tool definitions of SERVER[:TOOL]."),
    "approvals": ("mcpmux.cli.approvals_cmds", "approvals", "List and revoke remembered 'always' approvals."),
    "auth": ("mcpmux.cli.auth_cmds", "auth_group", "OAuth logins of HTTP servers: auth status."),
    "audit": ("mcpmux.cli.guard_cmds", "audit_cmd", "Show the audit log of calls."),
    "builtin": ("mcpmux.cli.builtin_cmd", "builtin", "Serve a built-in server (workspace, content_store) on stdio."),
    "call": ("mcpmux.cli.call_cmds", "call_cmd", "Call SERVER:TOOL with JSON or KEY=VALUE arguments."),
    "chat": ("mcpmux.chat.entry", "chat_cmd", "Chat with a model that uses every server's tools (/help inside)."),
    "completion": ("mcpmux.cli.completion", "completion_cmd", "Print a shell completion script (bash, zsh, fish)."),
    "config": ("mcpmux.cli.config_cmds", "config", "Show, locate and validate the configuration."),
    "connect": ("mcpmux.cli.daemon_cmds", "connect_cmd", "Serve SERVER (or --all) on stdio, warm from the daemon."),
    "daemon": ("mcpmux.cli.daemon_cmds", "daemon", "The per-user daemon keeping servers warm: start, stop, status."),
    "disable": ("mcpmux.cli.entry_cmds", "disable_cmd", "Disable a server (it stays configured)."),
    "doctor": ("mcpmux.cli.doctor", "doctor_cmd", "Check every server and the environment; print fix-it hints."),
    "enable": ("mcpmux.cli.entry_cmds", "enable_cmd", "Enable a disabled server."),
    "export": ("mcpmux.cli.transfer_cmds", "export_cmd", "Write the servers in another host's format."),
    "import": ("mcpmux.cli.transfer_cmds", "import_cmd", "Import the servers of Claude, Cursor or VS Code."),
    "list": ("mcpmux.cli.host_cmds", "list_cmd", "List every server with its state, tools and last error."),
    "login": ("mcpmux.cli.auth_cmds", "login_cmd", "Log in to an HTTP server with OAuth 2.1 (opens a browser)."),
    "logout": ("mcpmux.cli.auth_cmds", "logout_cmd", "Forget the OAuth login of a server on this machine."),
    "logs": ("mcpmux.cli.show_cmds", "logs_cmd", "Print (or follow) a server's stderr log."),
    "pins": ("mcpmux.cli.guard_cmds", "pins_cmd", "List pinned tool definitions and pending changes."),
    "prompt": ("mcpmux.cli.host_cmds", "prompt_cmd", "Render SERVER:PROMPT with arguments."),
    "prompts": ("mcpmux.cli.host_cmds", "prompts_cmd", "List the prompts of every server (or one)."),
    "read": ("mcpmux.cli.call_cmds", "read_cmd", "Read a resource of a server."),
    "record": ("mcpmux.cli.record_cmd", "record_cmd", "Record a server's session (through the gateway) for replay."),
    "refresh": ("mcpmux.cli.host_cmds", "refresh_cmd", "Re-list servers and store their lists in the catalog."),
    "remove": ("mcpmux.cli.entry_cmds", "remove_cmd", "Remove a server from the file that defines it."),
    "rename": ("mcpmux.cli.entry_cmds", "rename_cmd", "Rename a server in the file that defines it."),
    "resources": ("mcpmux.cli.host_cmds", "resources_cmd", "List the resources of every server (or one)."),
    "run": ("mcpmux.cli.chat_cmds", "run_cmd", "Send one prompt to the model with every server's tools."),
    "scan": ("mcpmux.cli.guard_cmds", "scan_cmd", "Scan tool definitions for hidden instructions (poisoning)."),
    "serve": ("mcpmux.cli.gateway_cmds", "serve_cmd", "Serve every configured server as one MCP server (the gateway)."),
    "skill": ("mcpmux.cli.host_cmds", "skill_cmd", "Load a server's agent skill, every file checked, and print it."),
    "skills": ("mcpmux.cli.host_cmds", "skills_cmd", "List the agent skills of every server (or one)."),
    "sources": ("mcpmux.cli.sources_cmds", "sources", "Register, sync and remove MCP and OpenAPI sources."),
    "show": ("mcpmux.cli.show_cmds", "show_cmd", "Everything about one server: config, state, tools, stderr."),
    "test": ("mcpmux.cli.probe_cmds", "test_cmd", "Connect to a server, ping it, list everything, report timings."),
    "token": ("mcpmux.cli.gateway_cmds", "token", "Create, list and revoke the gateway's bearer tokens."),
    "tools": ("mcpmux.cli.host_cmds", "tools_cmd", "List the tools of every server (or one), or show SERVER:TOOL."),
    "trust": ("mcpmux.cli.trust_cmds", "trust_cmd", "Trust a project's mcpmux.yaml as it is now (or --list them)."),
    "untrust": ("mcpmux.cli.trust_cmds", "untrust_cmd", "Withdraw the trust of a project's mcpmux.yaml."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = getattr(importlib.import_module(entry[0]), entry[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="mcpmux")
@click.option(
    "--config", "config_path", metavar="PATH", envvar="MCPMUX_CONFIG", help="Config file (last in precedence)."
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout.")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
@click.option(
    "--daemon/--no-daemon", "use_daemon", default=None, help="Require the daemon, or start servers here (see daemon)."
)
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, as_json: bool, verbose: int, use_daemon: bool | None) -> None:
    """mcpmux: many MCP servers in, one safe, namespaced tool surface out.

    Exit codes: 0 ok, 1 failed, 2 usage or config error, 3 server unreachable or timed out,
    4 authentication needed, 130 interrupted.
    """
    daemon = None if use_daemon is None else "on" if use_daemon else "off"
    ctx.obj = CliState(config_path=config_path, json=as_json, verbosity=verbose, daemon=daemon)
    ctx.meta["mcpmux.connection_factory"] = _connection_factory
    if _interactive():
        from mcpmux.cli.trust_cmds import install_prompt

        install_prompt()  # an untrusted project mcpmux.yaml is asked about here, refused elsewhere
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def _interactive() -> bool:
    try:
        return sys.stdin.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def _connection_factory(config: Any) -> Any:
    """How the chat's host opens servers (mcpmux.cli.connecting.daemon_factory; imported on use)."""
    from mcpmux.cli.connecting import daemon_factory

    return daemon_factory(config)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with the code of DESIGN section 3."""
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code instead of exiting (for tests and embedding)."""
    args = sys.argv[1:] if argv is None else argv
    as_json = _wants_json(args)
    if COMPLETE_VAR in os.environ:
        importlib.import_module("mcpmux.cli.completion")  # registers the colon-aware bash completer
    with masked_output():  # no value from ${VAR} in anything printed, error messages included
        return _outcome(argv, as_json)


def _outcome(argv: list[str] | None, as_json: bool) -> int:
    """The exit code of the command ``argv``, its errors printed."""
    try:
        result: Any = cli.main(args=argv, prog_name="mcpmux", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        if as_json:
            from mcpmux.cli.output import print_error_json

            print_error_json(type(exc).__name__, exc.format_message(), None, code)
        return code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return EXIT_INTERRUPTED
    except MCPMuxError as exc:
        from mcpmux.cli.output import print_error

        print_error(exc, as_json=as_json)
        return exit_code_for(exc)
    return result if isinstance(result, int) else 0


def _wants_json(args: list[str]) -> bool:
    # Known before parsing, so that a usage error of a `--json` command is JSON too.
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options
