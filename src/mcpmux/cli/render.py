"""How MCP objects look to people in a terminal (the JSON side is just ``dump``)."""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from mcpmux.cli.output import clip, out_console, table
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    import mcp_types as types

    from mcpmux.probe import ProbeReport
    from mcpmux.types import PromptInfo, ResourceInfo, ToolInfo

DESCRIPTION_WIDTH = 72


def dump(model: Any) -> Any:
    """A pydantic model as the JSON the wire would carry (camelCase, no nulls)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _first_line(text: str | None, width: int = DESCRIPTION_WIDTH) -> str:
    return clip(text, width)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def test_report(report: ProbeReport) -> JSONObject:
    """The facts ``mcpmux test`` reports, as JSON-ready data."""
    info = report.info
    peer = info.server_info
    caps = info.capabilities.model_dump(exclude_none=True, by_alias=True)
    timings = report.timings_s
    return {
        "server": report.server.name,
        "transport": report.server.type,
        "target": info.describe,
        "pid": info.pid,
        "protocol_version": info.protocol_version,
        "peer": {"name": peer.name, "version": peer.version} if peer else None,
        "capabilities": sorted(caps),
        "instructions": info.instructions,
        "counts": report.counts,
        "timings_ms": {
            "connect": _ms(timings["connect"]),
            "transport": _ms(info.transport_s),
            "handshake": _ms(info.handshake_s),
            "ping": _ms(timings["ping"]),
            "list": _ms(timings["list"]),
        },
    }


def print_test_report(report: JSONObject) -> None:
    peer = report["peer"]
    counts = report["counts"]
    t = report["timings_ms"]
    rows = [
        ("server", f"{report['server']} ({report['transport']})"),
        ("target", report["target"]),
        ("protocol", report["protocol_version"]),
        ("peer", f"{peer['name']} {peer['version']}" if peer else "(not given)"),
        ("offers", ", ".join(report["capabilities"]) or "nothing"),
        ("counts", ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in counts.items())),
        (
            "timings",
            f"connect {t['connect']} ms (transport {t['transport']}, handshake {t['handshake']}), "
            f"ping {t['ping']} ms, lists {t['list']} ms",
        ),
    ]
    if report["instructions"]:
        rows.append(("instructions", _first_line(report["instructions"], 100)))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key.ljust(width)}  {value}")
    click.echo("ok")


def print_tools(server: str, tools: list[types.Tool]) -> None:
    def params(tool: types.Tool) -> str:
        schema = tool.input_schema or {}
        required = set(schema.get("required") or [])
        names = list((schema.get("properties") or {}).keys())
        return ", ".join(f"{n}*" if n in required else n for n in names)

    rows = [(f"{server}:{t.name}", _first_line(t.description), params(t)) for t in tools]
    table(["tool", "description", "parameters (* required)"], rows)
    click.echo(f"{len(tools)} tool{'s' if len(tools) != 1 else ''}", err=True)


def print_tool_infos(tools: list[ToolInfo]) -> None:
    def params(tool: ToolInfo) -> str:
        required = set(tool.input_schema.get("required") or [])
        names = list((tool.input_schema.get("properties") or {}).keys())
        return ", ".join(f"{n}*" if n in required else n for n in names)

    table(
        ["tool", "description", "parameters (* required)"],
        [(t.name, _first_line(t.description), params(t)) for t in tools],
    )
    click.echo(f"{len(tools)} tool{'s' if len(tools) != 1 else ''}", err=True)


def print_resource_infos(resources: list[ResourceInfo]) -> None:
    rows = [
        (
            r.server,
            r.uri,
            r.name,
            r.mime_type or "",
            ("(template) " if r.template else "") + _first_line(r.description, 40),
        )
        for r in resources
    ]
    table(["server", "uri", "name", "type", "description"], rows)


def print_prompt_infos(prompts: list[PromptInfo]) -> None:
    rows = [
        (p.name, _first_line(p.description), ", ".join(f"{n}*" if req else n for n, req in p.arguments))
        for p in prompts
    ]
    table(["prompt", "description", "arguments (* required)"], rows)


def print_show(data: JSONObject) -> None:
    status = data["status"]
    console = out_console()
    console.print(
        f"[bold]{status['name']}[/bold] ({status['type']}): {status['state']} - {status['reason']}", highlight=False
    )
    console.print(f"target: {status['target']}", highlight=False, markup=False)
    if data.get("usage"):
        use = data["usage"]
        console.print(f"usage: {use['rss_mb']} MB resident, {use['cpu_seconds']} s CPU, {use['processes']} process(es)")
    if status["protocol_version"]:
        console.print(f"protocol {status['protocol_version']}, peer {status['server_info']}", highlight=False)
    if data["capabilities"] is not None:
        console.print("capabilities: " + (", ".join(sorted(data["capabilities"])) or "none"), highlight=False)
    console.print("\n[bold]config[/bold]")
    click.echo(json.dumps(data["config"], indent=2))
    if data["environment"] is not None:
        console.print("\n[bold]child environment[/bold] (allow-listed parent variables + env)")
        for key, value in data["environment"].items():
            click.echo(f"  {key}={value}")
    console.print("\n[bold]history[/bold]")
    for step in status["history"]:
        when = time.strftime("%H:%M:%S", time.localtime(step["at"]))
        click.echo(f"  {when}  {step['state']:<10} {step['reason']}")
    for key in ("tools", "resources", "prompts"):
        console.print(f"\n[bold]{key}[/bold] ({len(data[key])})")
        for item in data[key]:
            click.echo(f"  {item}")
    if data["withheld"]:
        console.print("\n[bold]withheld[/bold] (not listed, not callable)")
        for item in data["withheld"]:
            click.echo(f"  {item['tool']}: {item['kind']}: {item['reason']}")
    if data["stderr_tail"]:
        console.print("\n[bold]stderr (last lines)[/bold]")
        for line in data["stderr_tail"]:
            click.echo(f"  {line}")


def print_progress(progress: float, total: float | None, message: str | None) -> None:
    share = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    sys.stderr.write(f"progress {share}{': ' + message if message else ''}\n")
    sys.stderr.flush()


def print_tool_result(result: types.CallToolResult) -> None:
    shown = False
    for block in result.content:
        click.echo(describe_block(block))
        shown = True
    if result.structured_content is not None and not any(b.type == "text" for b in result.content):
        click.echo(json.dumps(result.structured_content, indent=2, ensure_ascii=False))
        shown = True
    if not shown:
        click.echo("(empty result)", err=True)


def describe_block(block: Any) -> str:
    """One content block as text: text as it is, anything else as a short bracketed summary."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        return text if text is not None else f"[resource {inner.uri}: {getattr(inner, 'mime_type', None) or 'binary'}]"
    if kind == "resource_link":
        return f"[link {block.uri}{' ' + block.name if getattr(block, 'name', None) else ''}]"
    return f"[{kind or type(block).__name__}]"


def print_resources(server: str, resources: list[types.Resource], templates: list[types.ResourceTemplate]) -> None:
    rows = [(r.uri, r.name, r.mime_type or "", _first_line(r.description, 50)) for r in resources]
    rows += [
        (t.uri_template, t.name, t.mime_type or "", "(template) " + _first_line(t.description, 39)) for t in templates
    ]
    table(["uri", "name", "type", "description"], rows, title=f"{server}: resources")
    click.echo(f"{len(resources)} resources, {len(templates)} templates", err=True)


def print_resource_contents(result: types.ReadResourceResult) -> None:
    for item in result.contents:
        text = getattr(item, "text", None)
        if text is not None:
            click.echo(text)
        else:
            size = len(getattr(item, "blob", "")) * 3 // 4
            click.echo(f"[binary {item.uri}: {item.mime_type or 'application/octet-stream'}, {size} bytes]")


def print_prompts(server: str, prompts: list[types.Prompt]) -> None:
    def arguments(prompt: types.Prompt) -> str:
        return ", ".join(f"{a.name}*" if a.required else a.name for a in prompt.arguments or [])

    rows = [(f"{server}:{p.name}", _first_line(p.description), arguments(p)) for p in prompts]
    table(["prompt", "description", "arguments (* required)"], rows)


def print_prompt(result: types.GetPromptResult) -> None:
    if result.description:
        click.echo(f"# {result.description}")
    for message in result.messages:
        out_console().print(f"[bold]{message.role}[/bold]", highlight=False)
        click.echo(describe_block(message.content))
