"""``mcpmux call`` and ``mcpmux read``: light to import, so a warm call through the daemon stays light.

This module imports click and the CLI's own light helpers only. A call first tries the daemon
(:mod:`mcpmux.cli.thin`: no SDK, no manager, and for a configuration the daemon knows no
configuration models either); otherwise the command takes the ordinary path of
:mod:`mcpmux.cli.host_cmds`, with its own host.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mcpmux.cli import render
from mcpmux.cli.arguments import call_arguments
from mcpmux.cli.completion import complete_servers, complete_tools
from mcpmux.cli.output import emit, json_option, state
from mcpmux.errors import EXIT_FAILED, EXIT_OK
from mcpmux.types.json_shapes import JSONObject

__all__ = ["call_cmd", "read_cmd"]


@click.command("call")
@click.argument("name", metavar="SERVER:TOOL", shell_complete=complete_tools)
@click.argument("arguments", metavar="[JSON | KEY=VALUE...]", nargs=-1)
@click.option(
    "--args-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Read JSON_ARGS from a file."
)
@click.option("--timeout", type=click.FloatRange(min=0.001), help="Seconds to wait (default: the server's timeout).")
@click.option(
    "--yes", "-y", is_flag=True, help="Approve a call that needs approval, this once (deny rules still apply)."
)
@click.option(
    "--no-validate",
    "no_validate",
    is_flag=True,
    help="Send the arguments without checking them against the tool's input schema (for schemas that lie).",
)
@click.option("--no-cache", "no_cache", is_flag=True, help="Call the server even if the server's cache holds a result.")
@json_option
def call_cmd(
    name: str,
    arguments: tuple[str, ...],
    args_file: Path | None,
    timeout: float | None,
    yes: bool,
    no_validate: bool,
    no_cache: bool,
) -> int:
    """Call a tool by its canonical name and print the result; exit 1 if the tool reports an error.

    Arguments are one JSON object ('{"path": "a.txt"}') or KEY=VALUE pairs (path=a.txt n=3), where a
    VALUE that parses as JSON is taken as JSON (3, true, null, [1]) and any other as a string;
    KEY:=JSON insists on JSON. Arguments that do not match the tool's input schema are refused
    before anything is sent (exit 2, naming the argument); --no-validate sends them anyway.
    """
    args = call_arguments(arguments, args_file)
    if timeout is None and not (no_validate or no_cache):
        from mcpmux.cli.thin import thin_call

        wire = thin_call(name, args, yes=yes)  # a warm server in the daemon: no SDK, no manager here
        if wire is not None:
            return _print_wire_result(name, wire)
    from mcpmux.cli.host_cmds import call_full

    return call_full(name, args, timeout=timeout, yes=yes, no_validate=no_validate, no_cache=no_cache)


def _print_wire_result(name: str, wire: JSONObject) -> int:
    """A ``tools/call`` result as the daemon sent it, printed as :func:`call_cmd` prints the SDK's."""
    from mcpmux.attach.thin import Wire

    if state().json:
        import mcp_types

        emit(render.dump(mcp_types.CallToolResult.model_validate(wire)))
    else:
        render.print_tool_result(Wire(wire))  # type: ignore[arg-type]  # read like the SDK's model
    if wire.get("isError"):
        sys.stderr.write(f"Error: tool {name!r} reported an error\n")
        return EXIT_FAILED
    return EXIT_OK


@click.command("read")
@click.argument("server", shell_complete=complete_servers)
@click.argument("uri")
@json_option
def read_cmd(server: str, uri: str) -> None:
    """Read resource URI of SERVER and print its contents."""
    from mcpmux.attach.thin import Wire
    from mcpmux.cli.thin import thin_read

    wire = thin_read(server, uri)  # a warm server in the daemon: no SDK, no manager here
    if wire is not None:
        if state().json:
            import mcp_types

            emit(render.dump(mcp_types.ReadResourceResult.model_validate(wire)))
        else:
            render.print_resource_contents(Wire(wire))  # type: ignore[arg-type]  # read like the SDK's model
        return
    from mcpmux.cli.host_cmds import read_full

    read_full(server, uri)
