"""Commands over many servers, through the :class:`~mcpmux.Host` (its guard on every call).

A one-shot command starts only what it needs: ``call``, ``read`` and ``prompt`` start the server they
address, ``tools SERVER`` that server; ``tools``, ``resources`` and ``prompts`` without a server and
``list`` start every enabled server except lazy ones that the catalog cache already describes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mcpmux.cli import render
from mcpmux.cli.arguments import json_object
from mcpmux.cli.completion import complete_prompts, complete_servers, complete_servers_or_tools
from mcpmux.cli.connecting import daemon_factory, raise_if_unusable, wait_with_progress, warn_unusable
from mcpmux.cli.output import clip, command_config, emit, json_option, redact_logs, state, table
from mcpmux.cli.running import run as run_to_end
from mcpmux.cli.tool_view import print_tool, tool_json
from mcpmux.config import Config
from mcpmux.config.display import mask_secrets
from mcpmux.errors import EXIT_FAILED, EXIT_OK, ApprovalDenied, MCPMuxError, NameNotQualified, ToolNotFound, closest
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from mcpmux.host import Host
    from mcpmux.policy import Approver
    from mcpmux.types import ServerStatus

_T = TypeVar("_T")


def run(body: Callable[[Config], Awaitable[_T]]) -> _T:
    """Load the configuration and run ``body`` on an event loop; secrets are masked in errors."""
    from mcpmux.config.display import redact

    config = command_config()
    state().secrets = config.secret_values
    redact_logs(config.secret_values)
    try:
        return run_to_end(body, config)
    except MCPMuxError as exc:
        exc.args = tuple(redact(str(a), config.secret_values) for a in exc.args)
        raise


@asynccontextmanager
async def managed(
    config: Config, start: bool | set[str] = True, *, approver: Approver | None = None
) -> AsyncIterator[Host]:
    """A started :class:`~mcpmux.Host`, with a progress line on stderr while servers connect.

    Every command goes through the host's guard: denied and quarantined tools are not listed,
    calls that need approval are asked in the terminal (or refused without one), and every call is
    audited. A server the command addressed by name (``start`` as a set) that could not be
    connected raises its own error (exit 3, or 4 when it needs authentication); any other server
    that is not usable is a warning on stderr.
    """
    from mcpmux.cli.approval import terminal_approver
    from mcpmux.host import Host
    from mcpmux.policy import ChainedApprovals
    from mcpmux.types.callbacks import ClientCallbacks

    # An upstream mcpmux's approval questions are answered here, once (mcpmux.policy.chained).
    callbacks = ClientCallbacks(elicitation=ChainedApprovals())
    host = Host(
        config, face="cli", approver=approver or terminal_approver(), callbacks=callbacks, start=start, wait=False,
        connection_factory=daemon_factory(config),
    )  # fmt: skip
    async with host:
        await wait_with_progress(host)
        if isinstance(start, set):
            raise_if_unusable(host, start)
        warn_unusable(host, config.secret_values)
        yield host


def tool_servers(config: Config, canonical: str, *, kind: str = "tool") -> set[str]:
    """The servers that may own ``canonical``: those whose namespace is its prefix, else unprefixed ones.

    This only chooses which servers to start; the call itself is routed by the manager's table.

    Raises:
        NameNotQualified: ``canonical`` has no ``server:`` prefix and no server is unprefixed.
    """
    namespace, sep, _ = canonical.partition(":")
    owners = {s.name for s in config.enabled_servers if sep and s.namespace == namespace}
    owners = owners or {s.name for s in config.enabled_servers if s.namespace == ""}
    if owners:
        return owners
    if not sep:
        from mcpmux.cli.fast_list import cached_tool_names

        known = cached_tool_names(config, prompts=kind == "prompt")
        raise NameNotQualified(canonical, [n for n in known if n.partition(":")[2] == canonical], kind=kind)
    return {namespace}


# -- listing -----------------------------------------------------------------------------------


@click.command("list")
@json_option
def list_cmd() -> None:
    """List every server: type, state, tools, target and last error (connects non-lazy servers)."""
    from mcpmux.cli.fast_list import emit_lazy_list

    if emit_lazy_list():  # every enabled server lazy and cached: no manager, no SDK import
        return

    async def body(config: Config) -> list[JSONObject]:
        async with managed(config) as guard:
            # A target (command line or URL) may hold an interpolated secret.
            return [mask_secrets(_with_usage(s), config.secret_values) for s in guard.status()]

    rows = run(body)

    def render_rows() -> None:
        table(
            ["server", "type", "state", "tools", "target", "last error"],
            [(r["name"], r["type"], r["state"], r["tools"], r["target"], _short(r["last_error"])) for r in rows],
        )

    emit(rows, render_rows)


def _with_usage(status: ServerStatus) -> JSONObject:
    """The status row plus ``usage`` (RSS, CPU seconds, processes of a stdio child's tree, else null)."""
    from mcpmux.processes.usage import process_usage

    usage = process_usage(status.pid)
    return {**status.to_json(), "usage": usage.to_json() if usage is not None else None}


def _short(text: str | None, width: int = 60) -> str:
    return clip(" ".join((text or "").split()), width)


@click.command("tools")
@click.argument("server", metavar="[SERVER | SERVER:TOOL]", required=False, shell_complete=complete_servers_or_tools)
@json_option
def tools_cmd(server: str | None) -> None:
    """List the tools of every server (or of SERVER) under their canonical names.

    Given SERVER:TOOL, show that one tool: its description, parameters, output schema and annotations.
    """
    if server is not None and _thin_tools(server):
        return
    if server is not None and ":" in server:
        _show_tool(server)
        return

    async def body(config: Config) -> list[Any]:
        if server is not None:
            config.server(server)
        async with managed(config, {server} if server else True) as guard:
            return guard.tools(server)

    tools = run(body)
    emit([tool_json(t) for t in tools], lambda: render.print_tool_infos(tools))


def _thin_tools(target: str) -> bool:
    """Print ``tools SERVER`` or ``tools SERVER:TOOL`` from a warm server in the daemon (no SDK, no manager
    here); ``False`` when the ordinary path must do it (it also reproduces every error exactly)."""
    from mcpmux.cli.thin import thin_tools

    listed = thin_tools(target)
    if listed is None:
        return False
    if ":" not in target:
        emit([tool_json(t) for t in listed], lambda: render.print_tool_infos(listed))
        return True
    tool = next((t for t in listed if t.name == target), None)
    if tool is None:
        return False  # the ordinary path names the closest tools
    emit(tool_json(tool), lambda: print_tool(tool))
    return True


def _show_tool(name: str) -> None:
    async def body(config: Config) -> Any:
        async with managed(config, tool_servers(config, name)) as guard:
            listed = {t.name: t for t in guard.tools()}
            if name not in listed:
                raise ToolNotFound(name, closest(name, listed))
            return listed[name]

    tool = run(body)
    emit(tool_json(tool), lambda: print_tool(tool))


@click.command("resources")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def resources_cmd(server: str | None) -> None:
    """List the resources and resource templates of every server (or of SERVER)."""

    async def body(config: Config) -> list[Any]:
        if server is not None:
            config.server(server)
        async with managed(config, {server} if server else True) as guard:
            return guard.resources(server)

    resources = run(body)
    data = [
        {k: getattr(r, k) for k in ("server", "uri", "name", "description", "mime_type", "template")} for r in resources
    ]
    emit(data, lambda: render.print_resource_infos(resources))


@click.command("skills")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def skills_cmd(server: str | None) -> None:
    """List the agent skills of every server (or of SERVER) that serves them.

    Servers declaring the skills extension (io.modelcontextprotocol/skills) list them; listing reads
    none of a skill's files. `mcpmux skill SERVER NAME` loads one, checking every file.
    """

    async def body(config: Config) -> list[Any]:
        if server is not None:
            config.server(server)
        async with managed(config, {server} if server else True) as guard:
            return await guard.skills(server)

    skills = run(body)
    data = [
        {
            "server": s.server, "name": s.entry.name, "uri": s.entry.uri, "description": s.entry.description,
            "files": "dynamic" if s.entry.resources == "dynamic" else len(s.entry.resources),
        }
        for s in skills
    ]  # fmt: skip
    rows = [(d["server"], d["name"], d["files"], clip(d["description"], 80)) for d in data]
    emit(data, lambda: table(["server", "skill", "files", "description"], rows) if rows else click.echo("no skills"))


@click.command("skill")
@click.argument("server", shell_complete=complete_servers)
@click.argument("name")
@json_option
def skill_cmd(server: str, name: str) -> None:
    """Load the skill NAME (or its SKILL.md URI) of SERVER and print its instructions.

    Every file is read under the server's read_resource rules (audited) and checked against the
    size and digest the server listed, and SKILL.md's frontmatter against the listed one; on any
    mismatch nothing is printed and the exit code is 3.
    """

    async def body(config: Config) -> Any:
        config.server(server)
        async with managed(config, {server}) as guard:
            return await guard.load_skill(server, name)

    loaded = run(body)
    data = {
        "server": server, "name": loaded.entry.name, "uri": loaded.entry.uri,
        "frontmatter": loaded.entry.frontmatter, "instructions": loaded.instructions, "files": loaded.files,
    }  # fmt: skip

    def show() -> None:
        click.echo(loaded.instructions.rstrip("\n"))
        for uri, text in loaded.files.items():
            click.echo(f"{uri} ({len(text)} characters, verified)", err=True)

    emit(data, show)


@click.command("prompts")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def prompts_cmd(server: str | None) -> None:
    """List the prompts of every server (or of SERVER) with their arguments."""

    async def body(config: Config) -> list[Any]:
        if server is not None:
            config.server(server)
        async with managed(config, {server} if server else True) as guard:
            return guard.prompts(server)

    prompts = run(body)
    data = [
        {"name": p.name, "server": p.server, "description": p.description, "arguments": [list(a) for a in p.arguments]}
        for p in prompts
    ]
    emit(data, lambda: render.print_prompt_infos(prompts))


# -- calls ---------------------------------------------------------------------------------------


def call_full(
    name: str, args: JSONObject, *, timeout: float | None, yes: bool, no_validate: bool, no_cache: bool
) -> int:
    """``mcpmux call`` on the ordinary path: this command's own host (:mod:`mcpmux.cli.call_cmds`)."""
    from mcpmux.cli.approval import approve_this_invocation

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        render.print_progress(progress, total, message)

    async def body(config: Config) -> Any:
        async with managed(
            config, tool_servers(config, name), approver=approve_this_invocation if yes else None
        ) as guard:
            try:
                return await guard.call_tool(
                    name, args, timeout=timeout, on_progress=on_progress,
                    validate=False if no_validate else None, cache=not no_cache,
                )  # fmt: skip
            except ApprovalDenied as exc:
                if exc.hint:
                    exc.hint += "; or pass --yes to approve this one call"
                raise

    result = run(body)
    emit(render.dump(result), lambda: render.print_tool_result(result))
    if result.is_error:
        sys.stderr.write(f"Error: tool {name!r} reported an error\n")
        return EXIT_FAILED
    return EXIT_OK


def read_full(server: str, uri: str) -> None:
    """``mcpmux read`` on the ordinary path: this command's own host (:mod:`mcpmux.cli.call_cmds`)."""

    async def body(config: Config) -> Any:
        config.server(server)
        async with managed(config, {server}) as guard:
            return await guard.read_resource(server, uri)

    result = run(body)
    emit(render.dump(result), lambda: render.print_resource_contents(result))


@click.command("prompt")
@click.argument("name", metavar="SERVER:PROMPT", shell_complete=complete_prompts)
@click.argument("arguments", metavar="[JSON_ARGS]", required=False)
@json_option
def prompt_cmd(name: str, arguments: str | None) -> None:
    """Render a prompt by its canonical name with JSON_ARGS and print its messages."""
    args = {k: v if isinstance(v, str) else json.dumps(v) for k, v in json_object(arguments, None).items()}

    async def body(config: Config) -> Any:
        async with managed(config, tool_servers(config, name, kind="prompt")) as guard:
            return await guard.get_prompt(name, args)

    result = run(body)
    emit(render.dump(result), lambda: render.print_prompt(result))


# -- management -------------------------------------------------------------------------------


@click.command("refresh")
@click.argument("server", required=False, shell_complete=complete_servers)
@json_option
def refresh_cmd(server: str | None) -> int:
    """Connect SERVER (or every enabled server), list everything again and store it in the catalog."""

    async def body(config: Config) -> list[JSONObject]:
        if server is not None:
            config.server(server)
        async with managed(config, start=False) as guard:
            await guard.refresh(server)
            rows = [s.to_json() for s in guard.status() if server is None or s.name == server]
            return [mask_secrets(row, config.secret_values) for row in rows]

    rows = run(body)

    def render_rows() -> None:
        for row in rows:
            outcome = f"{row['tools']} tools" if row["state"] == "connected" else f"{row['state']}: {row['reason']}"
            click.echo(f"{row['name']}: {outcome}")

    emit(rows, render_rows)
    return EXIT_OK if all(r["state"] in ("connected", "disabled") for r in rows) else EXIT_FAILED
