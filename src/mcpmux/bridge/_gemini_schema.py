"""The OpenAPI 3.0 subset Gemini accepts in ``FunctionDeclaration.parameters``.

Gemini rejects unknown keywords ("Invalid JSON payload received. Unknown name ...") instead of
ignoring them, so this is an allow-list, kept conservative:

- kept: ``type`` (one string), ``format`` (only ``enum``/``date-time`` on strings, ``float``/``double``
  on numbers, ``int32``/``int64`` on integers), ``description``, ``nullable``, ``enum`` (strings only),
  ``items``, ``properties``, ``required`` (only names present in ``properties``), ``anyOf``,
  ``minItems``, ``maxItems``, ``minimum``, ``maximum``, ``minLength``, ``maxLength``,
  ``minProperties``, ``maxProperties``.
- rewritten: ``const`` -> ``enum: [const]``; ``oneOf`` -> ``anyOf``; ``allOf`` merged into one schema;
  ``type: [t, "null"]`` -> ``type: t, nullable: true``; several types -> ``anyOf`` of one branch per
  type; a ``{"type": "null"}`` alternative -> ``nullable: true``; ``exclusiveMinimum``/``Maximum``
  (2020-12 numbers) -> ``minimum``/``maximum``; a non-string ``enum`` -> its values listed in the
  description; an ``array`` without a typed ``items`` -> ``items: {"type": "string"}``.
- dropped: everything else, notably ``additionalProperties``, ``patternProperties``, ``pattern``,
  ``default``, ``examples``, ``title``, ``not``, ``if``/``then``/``else``, ``prefixItems``.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["to_gemini_subset"]

_KEPT = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
    }
)
_FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"}, "integer": {"int32", "int64"}}
_TYPE_KEYWORDS = {
    "array": {"items", "minItems", "maxItems"},
    "object": {"properties", "required", "minProperties", "maxProperties"},
    "string": {"enum", "format", "minLength", "maxLength"},
    "number": {"minimum", "maximum", "format"},
    "integer": {"minimum", "maximum", "format"},
}
_SHARED = {"description", "nullable"}


def to_gemini_subset(node: Any) -> Any:
    """Rewrite one (already inlined) JSON schema into Gemini's subset; returns a new object."""
    if not isinstance(node, dict):
        return node
    schema = _rewrite(dict(node))
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _KEPT:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: to_gemini_subset(sub) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = [to_gemini_subset(v) for v in value] if isinstance(value, list) else to_gemini_subset(value)
        else:
            out[key] = value
    return _finish(out)


def _rewrite(schema: dict[str, Any]) -> dict[str, Any]:
    if "const" in schema and "enum" not in schema:
        schema["enum"] = [schema["const"]]
    if isinstance(schema.get("oneOf"), list):
        schema["anyOf"] = [*schema.get("anyOf", []), *schema.pop("oneOf")]
    if isinstance(schema.get("allOf"), list):
        schema = _merge_all_of(schema)
    for exclusive, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if isinstance(schema.get(exclusive), int | float) and inclusive not in schema:
            schema[inclusive] = schema[exclusive]
    if isinstance(schema.get("type"), list):
        schema = _split_types(schema)
    if isinstance(schema.get("anyOf"), list):
        schema = _fold_null_branches(schema)
    return _fix_enum(schema)


def _merge_all_of(schema: dict[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for branch in schema["allOf"]:
        if not isinstance(branch, dict):
            continue
        properties = {**merged.get("properties", {}), **branch.get("properties", {})}
        required = sorted({*merged.get("required", []), *branch.get("required", [])})
        merged = {**branch, **merged}
        if properties:
            merged["properties"] = properties
        if required:
            merged["required"] = required
    return merged


def _split_types(schema: dict[str, Any]) -> dict[str, Any]:
    types = [t for t in schema["type"] if isinstance(t, str)]
    concrete = [t for t in types if t != "null"]
    rest = {k: v for k, v in schema.items() if k != "type"}
    if "null" in types:
        rest["nullable"] = True
    if len(concrete) <= 1:
        return {**rest, "type": concrete[0] if concrete else "string"}
    branches = [{"type": t, **{k: v for k, v in rest.items() if k in _TYPE_KEYWORDS.get(t, ())}} for t in concrete]
    return {**{k: v for k, v in rest.items() if k in _SHARED}, "anyOf": branches}


def _fold_null_branches(schema: dict[str, Any]) -> dict[str, Any]:
    branches = [b for b in schema["anyOf"] if not (isinstance(b, dict) and b.get("type") == "null")]
    if len(branches) < len(schema["anyOf"]):
        schema = {**schema, "nullable": True}
    if len(branches) != 1 or not isinstance(branches[0], dict):
        return {**schema, "anyOf": branches}
    # One real alternative left: it becomes the schema; the outer description wins.
    folded = {**_rewrite(dict(branches[0])), **{k: v for k, v in schema.items() if k != "anyOf"}}
    return folded


def _fix_enum(schema: dict[str, Any]) -> dict[str, Any]:
    values = schema.get("enum")
    if not isinstance(values, list):
        return schema
    if None in values:
        values = [v for v in values if v is not None]
        schema = {**schema, "nullable": True}
    if values and all(isinstance(v, str) for v in values):
        return {**schema, "enum": values, "type": "string"}
    listed = ", ".join(json.dumps(v) for v in values)
    description = f"{schema.get('description', '')} (one of: {listed})".strip()
    return {**{k: v for k, v in schema.items() if k != "enum"}, "description": description}


def _finish(out: dict[str, Any]) -> dict[str, Any]:
    if "type" not in out and "anyOf" not in out:
        out["type"] = "object" if "properties" in out else "array" if "items" in out else "string"
    kind = out.get("type")
    if "format" in out and out["format"] not in _FORMATS.get(str(kind), set()):
        del out["format"]
    if kind == "array" and not (
        isinstance(out.get("items"), dict) and ("type" in out["items"] or out["items"].get("anyOf"))
    ):
        out["items"] = {"type": "string"}
    if isinstance(out.get("required"), list):
        known = out.get("properties") or {}
        out["required"] = [name for name in out["required"] if name in known]
        if not out["required"]:
            del out["required"]
    return out
