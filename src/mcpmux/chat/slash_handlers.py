"""The slash commands. Each handler's docstring is its ``/help`` line; none needs a model."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from rich.markup import escape
from rich.panel import Panel

from mcpmux.bridge.providers import make_provider
from mcpmux.bridge.results import normalise_result
from mcpmux.chat.render import preview, print_table
from mcpmux.chat.slash import TABLE, ChatState, slash

__all__: list[str] = []

RESULT_CHARS = 4000


class UsageError(ValueError):
    """A slash command was given arguments it cannot use; the message says how to call it."""


@slash("help")
async def help_cmd(state: ChatState, rest: str) -> None:
    """List the slash commands."""
    print_table(state.console, ["command", "what it does"], [[s.usage, s.summary] for s in TABLE.values()])
    state.console.print("[dim]Anything else is sent to the model. Ctrl-C stops an answer; Ctrl-D quits.[/]")


@slash("mcp")
async def mcp_cmd(state: ChatState, rest: str) -> None:
    """Show the servers and their states."""
    rows = [[s.name, s.type, s.state.value, s.tools, preview(s.reason, 80)] for s in state.session.guard.status()]
    print_table(state.console, ["server", "type", "state", "tools", "reason"], rows)


@slash("mcp status")
async def mcp_status_cmd(state: ChatState, rest: str) -> None:
    """Show every server in detail: target, protocol, restarts, last error."""
    for s in state.session.guard.status():
        lines = [
            f"state: {s.state.value} ({s.reason})",
            f"target: {s.target}",
            f"tools: {s.tools}  restarts: {s.restarts}",
            f"protocol: {s.protocol_version or '-'}  server: {s.server_info or '-'}",
        ]
        if s.last_error:
            lines.append(f"last error: {s.last_error}")
        state.console.print(Panel(escape("\n".join(lines)), title=s.name, expand=False))


@slash("mcp tools", "[server]")
async def mcp_tools_cmd(state: ChatState, rest: str) -> None:
    """List the tools the model may use (of one server if given)."""
    tools = state.session.guard.tools(rest.strip() or None)
    print_table(state.console, ["tool", "description"], [[t.name, preview(t.description, 100)] for t in tools])


@slash("mcp resources", "[server]")
async def mcp_resources_cmd(state: ChatState, rest: str) -> None:
    """List resources and templates (of one server if given)."""
    resources = state.session.guard.resources(rest.strip() or None)
    rows = [[r.server, r.uri, r.name, preview(r.description, 80)] for r in resources]
    print_table(state.console, ["server", "uri", "name", "description"], rows)


@slash("mcp prompts", "[server]")
async def mcp_prompts_cmd(state: ChatState, rest: str) -> None:
    """List prompts and their arguments (of one server if given)."""
    rows = [
        [p.name, " ".join(f"{a}{'*' if req else ''}" for a, req in p.arguments), preview(p.description, 80)]
        for p in state.session.guard.prompts(rest.strip() or None)
    ]
    print_table(state.console, ["prompt", "arguments", "description"], rows)


@slash("mcp refresh", "[server]")
async def mcp_refresh_cmd(state: ChatState, rest: str) -> None:
    """Re-list tools, resources and prompts (of one server if given)."""
    await state.session.guard.refresh(rest.strip() or None)
    state.console.print(f"refreshed {rest.strip() or 'every server'}")


@slash("mcp disable", "server")
async def mcp_disable_cmd(state: ChatState, rest: str) -> None:
    """Stop a server and hide its tools from the model until /mcp enable (this session only)."""
    name = _server_argument(rest, "disable")
    changed = await state.session.guard.disable(name)
    state.console.print(f"disabled {escape(name)}" if changed else f"{escape(name)} was disabled already")


@slash("mcp enable", "server")
async def mcp_enable_cmd(state: ChatState, rest: str) -> None:
    """Start a disabled server again; its tools come back."""
    name = _server_argument(rest, "enable")
    changed = await state.session.guard.enable(name)
    state.console.print(f"enabled {escape(name)}" if changed else f"{escape(name)} was enabled already")


def _server_argument(rest: str, verb: str) -> str:
    name = rest.strip()
    if not name or " " in name:
        raise UsageError(f"usage: /mcp {verb} SERVER")
    return name


@slash("call", "server:tool {json}")
async def call_cmd(state: ChatState, rest: str) -> None:
    """Call a tool yourself (policy and approval apply)."""
    name, _, text = rest.strip().partition(" ")
    if not name:
        raise UsageError("usage: /call server:tool {json arguments}")
    arguments = _json_object(text)
    started = time.monotonic()
    result = normalise_result(await state.session.guard.call_tool(name, arguments, caller="chat"))
    state.renderer.tool_result(name, result, time.monotonic() - started)
    state.console.print(Panel(escape(result.as_text()[:RESULT_CHARS]), title=name, expand=False))


@slash("read", "server uri")
async def read_cmd(state: ChatState, rest: str) -> None:
    """Read a resource of a server."""
    server, _, uri = rest.strip().partition(" ")
    if not uri.strip():
        raise UsageError("usage: /read server uri")
    result = await state.session.guard.read_resource(server, uri.strip(), caller="chat")
    parts = [c.text if isinstance(c, types.TextResourceContents) else f"[blob {c.mime_type}]" for c in result.contents]
    text = "\n".join(parts)
    state.transcript.add("command", text, f"/read {server} {uri.strip()}")
    state.console.print(Panel(escape(text[:RESULT_CHARS]), title=uri.strip(), expand=False))


@slash("prompt", "server:name [json | key=value ...]")
async def prompt_cmd(state: ChatState, rest: str) -> None:
    """Put an MCP prompt into the conversation (the model answers it if one is configured)."""
    name, _, text = rest.strip().partition(" ")
    if not name:
        raise UsageError("usage: /prompt server:name [json | key=value ...]")
    arguments = _prompt_arguments(text.strip())
    result = await state.session.guard.get_prompt(name, arguments, caller="chat")
    messages = [(m.role, m.content.text if isinstance(m.content, types.TextContent) else f"[{m.content.type}]")
                for m in result.messages]  # fmt: skip
    for role, content in messages:
        state.console.print(Panel(escape(content[:RESULT_CHARS]), title=f"{name} ({role})", expand=False))
        state.transcript.add("prompt", content, f"{name} {role}")
    if state.session.provider is None:
        state.console.print("[dim]no model configured: the prompt is shown, not sent[/]")
        return
    loop = state.session.loop()
    loop.messages += [{"role": role, "content": content} for role, content in messages]
    if messages and messages[-1][0] == "user" and state.converse is not None:
        await state.converse(None)


@slash("approve", "[server[:tool]] [--yes]")
async def approve_cmd(state: ChatState, rest: str) -> None:
    """List tools held back for approval, or approve those of a server (or one tool).

    Definitions the scanner flags high are shown with their findings and approved only with --yes.
    """
    guard = state.session.guard
    words = rest.split()
    if not words:
        rows = [[e.tool.name, e.kind, preview(e.reason, 80)] for e in guard.withheld()]
        print_table(state.console, ["tool", "held back", "why"], rows)
        return
    target, yes = words[0], "--yes" in words[1:]
    server, _, tool = target.partition(":")
    flagged = guard.high_findings(server, tool or None)
    if flagged and not yes:
        state.console.print("[bold red]the scanner flagged what you are approving:[/]")
        for f in flagged:
            finding = f"{f.server}:{f.tool} [{f.rule}] {f.message} in {f.location}: {f.excerpt}"
            state.console.print(f"  {escape(finding)}")
        state.console.print(f"nothing approved; approve anyway with /approve {escape(target)} --yes")
        return
    count = guard.approve(server, tool or None)
    state.console.print(f"approved {count} definition(s) of {escape(target)}")


@slash("model", "[name]")
async def model_cmd(state: ChatState, rest: str) -> None:
    """Show the model, or switch to another one."""
    if rest.strip():
        state.llm = state.llm.model_copy(update={"model": rest.strip()})
        old, state.session.provider = state.session.provider, make_provider(state.llm)
        if old is not None:
            await old.aclose()
    provider = state.session.provider
    if provider is None:
        state.console.print("no model configured (set llm.model, --model or OPENAI_API_KEY)")
        return
    state.console.print(f"{provider.name} {provider.model} at {state.llm.base_url or 'the default endpoint'}")
    state.renderer.print_usage()


@slash("clear")
async def clear_cmd(state: ChatState, rest: str) -> None:
    """Start a new conversation."""
    if state.session.provider is not None:
        state.session.loop().clear()
    state.transcript.clear()
    state.console.print("conversation cleared")


@slash("save", "FILE")
async def save_cmd(state: ChatState, rest: str) -> None:
    """Save the transcript (JSON if FILE ends with .json, else markdown)."""
    if not rest.strip():
        raise UsageError("usage: /save FILE (.json for JSON, anything else for markdown)")
    path = Path(rest.strip())
    model = state.session.provider.model if state.session.provider is not None else None
    # A transcript is small: writing it inline is quicker than a thread hop.
    kind = state.transcript.save(path, model=model)
    state.console.print(f"saved {len(state.transcript.entries)} entries to {escape(str(path))} ({kind})")


@slash("exit")
async def exit_cmd(state: ChatState, rest: str) -> None:
    """Leave the chat (Ctrl-D works too)."""
    state.done = True


def _json_object(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"the arguments are not valid JSON: {exc.msg} (column {exc.colno})") from exc
    if not isinstance(value, dict):
        raise UsageError("the arguments must be a JSON object")
    return value


def _prompt_arguments(text: str) -> dict[str, str]:
    if text.startswith("{"):
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in _json_object(text).items()}
    pairs = [part.partition("=") for part in text.split()]
    if any(not sep for _, sep, _ in pairs):
        raise UsageError("prompt arguments are a JSON object or key=value pairs")
    return {key: value for key, _, value in pairs}
