"""Tool input schemas made acceptable to each LLM provider.

MCP servers send JSON Schema (2020-12 by default, often with ``$defs`` from pydantic); providers
accept less. :func:`normalise_schema` returns a new schema, never touching its input:

- every profile: a missing or empty schema becomes ``{"type": "object", "properties": {}}``; the
  top level is forced to ``type: object`` with a ``properties`` map (OpenAI rejects anything else);
  a top-level ``anyOf``/``oneOf``/``allOf`` of objects is merged into it (properties united;
  ``required`` intersected for alternatives, united for ``allOf``).
- ``openai``, ``anthropic``, ``gemini``: local ``$ref``s (``#/$defs/X``, ``#/definitions/X``,
  any ``#/...`` pointer) are inlined and ``$defs``/``definitions`` removed. A reference to a
  schema already being expanded (recursion) becomes ``{"type": <its type or object>}`` with a
  note in ``description``; so does a reference that cannot be resolved (remote or broken). The
  meta keywords ``$schema``, ``$id``, ``$anchor``, ``$dynamicAnchor``, ``$vocabulary`` and
  ``$comment`` are dropped. An ``array`` without ``items`` gets ``items: {}`` (OpenAI rejects it).
  Past :data:`MAX_REF_EXPANSIONS` expansions (shared definitions can grow exponentially when
  inlined), further references become such placeholders too.
- ``gemini`` additionally gets its OpenAPI 3.0 subset (see :mod:`mcpmux.bridge._gemini_schema`).
- ``mcp`` (the gateway re-serving the schema to another MCP client): only the top-level fixes;
  references are kept, since MCP clients resolve them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcpmux.bridge._gemini_schema import to_gemini_subset
from mcpmux.types.json_shapes import JSONObject

__all__ = ["MAX_REF_EXPANSIONS", "SCHEMA_PROFILES", "JSONObject", "normalise_schema"]

SCHEMA_PROFILES = ("openai", "anthropic", "gemini", "mcp")

_META_KEYWORDS = frozenset({"$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment"})
_DEF_KEYWORDS = ("$defs", "definitions")
_ALTERNATIVES = ("anyOf", "oneOf", "allOf")
# Under these keywords dict keys are property names, not keywords: a property may be called "$id".
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
# These hold instance values, not schemas: left exactly as sent.
_VALUE_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
MAX_REF_EXPANSIONS = 1000


def normalise_schema(schema: JSONObject | None, profile: str) -> JSONObject:
    """Return a copy of ``schema`` that ``profile``'s provider accepts as function parameters.

    Args:
        schema: the tool's input schema as the server sent it (``None`` or ``{}`` for no arguments).
        profile: ``openai``, ``anthropic``, ``gemini`` or ``mcp``.

    Raises:
        ValueError: unknown profile.
    """
    if profile not in SCHEMA_PROFILES:
        raise ValueError(f"unknown schema profile {profile!r} (known: {', '.join(SCHEMA_PROFILES)})")
    if not isinstance(schema, dict) or not schema:
        return {"type": "object", "properties": {}}
    if profile == "mcp":
        return _object_top_level(_copy(schema))
    result = _object_top_level(_clean(_Inliner(schema).expand(schema)))
    return to_gemini_subset(result) if profile == "gemini" else result


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


class _Inliner:
    """Expands local ``$ref``s against one root schema, cutting recursion."""

    def __init__(self, root: JSONObject) -> None:
        self._root = root
        self._active: list[str] = []
        self._expansions = 0

    def expand(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.expand(item) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            return self._expand_ref(node)
        return {key: self._expand_child(key, value) for key, value in node.items() if key not in _DEF_KEYWORDS}

    def _expand_child(self, key: str, value: Any) -> Any:
        if key in _NAME_MAPS and isinstance(value, dict):
            return {name: self.expand(sub) for name, sub in value.items()}
        return _copy(value) if key in _VALUE_KEYWORDS else self.expand(value)

    def _expand_ref(self, node: JSONObject) -> Any:
        ref: str = node["$ref"]
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        target = self._resolve(ref)
        if target is None:
            return _placeholder({}, f"unresolvable reference {ref}", siblings)
        if ref in self._active:
            return _placeholder(target, f"recursive reference {ref} not expanded", siblings)
        # Shared definitions referenced from many places can grow exponentially when inlined.
        self._expansions += 1
        if self._expansions > MAX_REF_EXPANSIONS:
            return _placeholder(target, f"reference {ref} not expanded: schema too large", siblings)
        self._active.append(ref)
        try:
            expanded = self.expand(target)
        finally:
            self._active.pop()
        if not isinstance(expanded, dict):
            return expanded
        # 2020-12 lets a $ref sit beside other keywords; the local ones (description) win.
        return {**expanded, **self.expand(siblings)}

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self._root
        for raw in ref[1:].split("/")[1:]:
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node


def _placeholder(target: Any, note: str, siblings: JSONObject) -> JSONObject:
    kind = target.get("type") if isinstance(target, dict) else None
    described = siblings.get("description")
    text = f"{described} ({note})" if isinstance(described, str) and described else f"({note})"
    return {"type": kind if isinstance(kind, str) else "object", "description": text}


def _clean(node: Any) -> Any:
    """Drop meta keywords everywhere and give every ``array`` an ``items`` schema."""
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if not isinstance(node, dict):
        return node
    cleaned = {key: _clean_child(key, value) for key, value in node.items() if key not in _META_KEYWORDS}
    if _has_type(cleaned, "array") and "items" not in cleaned and "prefixItems" not in cleaned:
        cleaned["items"] = {}
    return cleaned


def _clean_child(key: str, value: Any) -> Any:
    if key in _NAME_MAPS and isinstance(value, dict):
        return {name: _clean(sub) for name, sub in value.items()}
    return value if key in _VALUE_KEYWORDS else _clean(value)


def _has_type(node: JSONObject, kind: str) -> bool:
    declared = node.get("type")
    return declared == kind or (isinstance(declared, list) and kind in declared)


def _object_top_level(schema: JSONObject) -> JSONObject:
    for keyword in _ALTERNATIVES:
        branches = schema.get(keyword)
        if isinstance(branches, list) and all(_is_object_schema(b) for b in branches):
            schema = _merge_branches({k: v for k, v in schema.items() if k != keyword}, branches, keyword)
    schema["type"] = "object"
    if not isinstance(schema.get("properties"), dict):
        schema["properties"] = {}
    return schema


def _is_object_schema(branch: Any) -> bool:
    return isinstance(branch, dict) and (branch.get("type") == "object" or "properties" in branch)


def _merge_branches(schema: JSONObject, branches: list[JSONObject], keyword: str) -> JSONObject:
    properties: JSONObject = dict(schema.get("properties") or {})
    required_sets = [set(b.get("required") or ()) for b in branches]
    combine: Callable[..., set[str]] = set.union if keyword == "allOf" else set.intersection
    required = set(schema.get("required") or ()) | (combine(*required_sets) if required_sets else set())
    for branch in branches:
        properties.update(branch.get("properties") or {})
    merged = {**schema, "properties": properties}
    if required:
        merged["required"] = sorted(required)
    return merged
