"""``mcpmux tools SERVER:TOOL``: one tool for people (description, parameters, output, annotations) or as JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from mcpmux.cli.output import out_console, table
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    from mcpmux.types import ToolInfo

__all__ = ["print_tool", "schema_rows", "tool_json"]


def tool_json(tool: ToolInfo) -> JSONObject:
    """The ``--json`` shape of one tool (the same object ``mcpmux tools --json`` lists)."""
    return {
        "name": tool.name,
        "server": tool.server,
        "tool": tool.tool,
        "title": tool.title,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations,
        "synthetic": tool.synthetic,
    }


def schema_rows(schema: JSONObject | None) -> list[tuple[str, str, str, str]]:
    """One row per property of an object schema: name (``*`` when required), type, constraints, description."""
    schema = schema or {}
    required = set(schema.get("required") or [])
    rows = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        rows.append(
            (f"{name}*" if name in required else name, _type(prop), _constraints(prop), prop.get("description", ""))
        )
    return rows


def _type(prop: JSONObject) -> str:
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"array of {_type(prop['items'])}"
    if kind:
        return str(kind)
    for union in ("anyOf", "oneOf"):
        if isinstance(prop.get(union), list):
            return " | ".join(_type(p) for p in prop[union] if isinstance(p, dict))
    return "any"


def _constraints(prop: JSONObject) -> str:
    parts = []
    if "enum" in prop:
        parts.append("one of " + ", ".join(json.dumps(v) for v in prop["enum"]))
    if "default" in prop:
        parts.append(f"default {json.dumps(prop['default'])}")
    for key in ("minimum", "maximum", "minLength", "maxLength", "pattern", "format"):
        if key in prop:
            parts.append(f"{key} {prop[key]}")
    return "; ".join(parts)


def print_tool(tool: ToolInfo) -> None:
    """The readable view: heading, full description, parameters, output schema, annotations."""
    console = out_console()
    title = f" ({tool.title})" if tool.title else ""
    console.print(f"[bold]{tool.name}[/bold]{title}", highlight=False)
    origin = "made by mcpmux" if tool.synthetic else f"server {tool.server!r}, tool {tool.tool!r}"
    click.echo(origin)
    if tool.description.strip():
        click.echo(f"\n{tool.description.strip()}")
    _section("parameters (* required)", tool.input_schema)
    if tool.output_schema is not None:
        _section("output (structured content)", tool.output_schema)
    if tool.annotations:
        console.print("\n[bold]annotations[/bold]", highlight=False)
        for key, value in tool.annotations.items():
            click.echo(f"  {key}: {json.dumps(value)}")


def _section(heading: str, schema: JSONObject) -> None:
    out_console().print(f"\n[bold]{heading}[/bold]", highlight=False)
    rows = schema_rows(schema)
    if rows:
        table(["name", "type", "constraints", "description"], rows)
    elif schema.get("properties") == {} or not schema.get("properties"):
        click.echo("  none" if schema.get("type", "object") == "object" else f"  {json.dumps(schema)}")
    extra = {k: v for k, v in schema.items() if k not in ("type", "properties", "required", "$schema", "title")}
    if extra:
        click.echo(f"  schema also says: {json.dumps(extra, ensure_ascii=False)}")
