"""``$ref`` resolution and OpenAPI schema -> JSON Schema, bounded.

Only local references (``#/components/...``, ``#/definitions/...``) are followed: an external one
(``other.yaml#/X``, ``http://...``, ``file:///...``) would make reading a document fetch or read
anything, so it is an error. Schemas are inlined (LLM providers take no ``$ref``): a reference
already being expanded (a cycle) or nested deeper than :data:`MAX_REF_DEPTH` becomes an open schema
that says what it stands for, and one tool's schema stops growing at :data:`MAX_SCHEMA_NODES`, so no
document can make a tool list explode.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from mcpmux.errors import SpecError
from mcpmux.servers.openapi.document import SpecDocument

__all__ = ["MAX_DOCUMENT_NODES", "MAX_REF_DEPTH", "MAX_SCHEMA_NODES", "RefResolver", "walk_operations"]

MAX_REF_DEPTH = 12
MAX_SCHEMA_NODES = 3_000
MAX_DOCUMENT_NODES = 1_000_000
_MAX_REF_HOPS = 32
_MAX_TEXT_CHARS = 2_000

# Keys whose value is one schema, a list of schemas, or a mapping of names to schemas.
_ONE = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_NAMED = ("properties", "patternProperties", "dependentSchemas")
# Plain keywords kept as they are; anything else (discriminator, xml, externalDocs, example, x-*) is dropped.
_PLAIN = (
    "type",
    "format",
    "enum",
    "const",
    "default",
    "required",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "title",
    "description",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "contentMediaType",
    "contentEncoding",
)


class RefResolver:
    """Follows local ``$ref`` pointers of one document and inlines its schemas.

    Args:
        document: the parsed document.
    """

    def __init__(self, document: SpecDocument) -> None:
        self.document = document
        self._budget = MAX_SCHEMA_NODES
        self._total = 0

    def lookup(self, ref: str, where: str) -> Any:
        """The value ``ref`` (``#/a/b``) points at.

        Raises:
            SpecError: an external reference, or nothing at that pointer.
        """
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SpecError(self.document.source, where, f"external $ref {ref!r} is not supported (only '#/...')")
        node: Any = self.document.data
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SpecError(self.document.source, where, f"$ref {ref!r} points at nothing")
        return node

    def deref(self, node: Any, where: str) -> Any:
        """``node`` with its own ``$ref`` chain followed (a parameter, request body, response).

        Raises:
            SpecError: a bad reference, or a chain that loops or is longer than 32 hops.
        """
        seen: set[str] = set()
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen or len(seen) >= _MAX_REF_HOPS:
                raise SpecError(self.document.source, where, f"$ref {ref!r} refers to itself")
            seen.add(ref)
            node = self.lookup(ref, where)
        return node

    def new_tool(self) -> None:
        """Start the schema budget of the next tool (:data:`MAX_SCHEMA_NODES` nodes)."""
        self._budget = MAX_SCHEMA_NODES

    def schema(self, node: Any, where: str) -> dict[str, Any]:
        """``node`` as a self-contained JSON Schema (references inlined, within the bounds).

        Raises:
            SpecError: a reference that is external or points at nothing, or the document's schemas
                expanding to more than :data:`MAX_DOCUMENT_NODES` nodes in all.
        """
        converted = self._convert(node, where, ())
        return converted if isinstance(converted, dict) else {}

    def _convert(self, node: Any, where: str, stack: tuple[str, ...]) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            return {}
        self._budget -= 1
        self._total += 1
        if self._total > MAX_DOCUMENT_NODES:
            raise SpecError(self.document.source, where, f"schemas expand to more than {MAX_DOCUMENT_NODES} nodes")
        if self._budget <= 0:
            return {"description": "(not expanded: the schema is too large)"}
        if "$ref" in node:
            return self._inline(node["$ref"], where, stack)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in _NAMED and isinstance(value, dict):
                out[key] = {name: self._convert(sub, where, stack) for name, sub in value.items()}
            elif key in _MANY and isinstance(value, list):
                out[key] = [self._convert(sub, where, stack) for sub in value]
            elif key in _ONE and isinstance(value, dict | bool):
                out[key] = self._convert(value, where, stack)
            elif key == "items" and isinstance(value, list):  # draft 4 tuple form
                out["prefixItems"] = [self._convert(sub, where, stack) for sub in value]
            elif key in _PLAIN:
                out[key] = _clip(value) if key in ("description", "title") else value
        return _normalise(out, node)

    def _inline(self, ref: Any, where: str, stack: tuple[str, ...]) -> Any:
        name = str(ref).rsplit("/", 1)[-1]
        if ref in stack:
            return {"description": f"(recursive: {name}; the same shape as the enclosing {name})"}
        if len(stack) >= MAX_REF_DEPTH:
            return {"description": f"(not expanded: {name} is nested too deeply)"}
        target = self.lookup(str(ref), where)
        return self._convert(target, where, (*stack, str(ref)))


def _normalise(out: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.0 / Swagger quirks as JSON Schema: ``nullable``, ``type: file``, bool-less required."""
    if original.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if out.get("type") == "file":
        out["type"], out["format"] = "string", "binary"
    kind = out.get("type")
    if kind is not None and not _valid_type(kind):
        # Seen in published documents: ``type: int``; a provider would reject the whole tool list.
        fixed = _TYPE_ALIASES.get(str(kind).lower()) if isinstance(kind, str) else None
        if fixed is None:
            del out["type"]
        else:
            out["type"] = fixed
    if "required" in out and not (
        isinstance(out["required"], list) and all(isinstance(r, str) for r in out["required"])
    ):
        del out["required"]
    return out


_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_TYPE_ALIASES = {
    "int": "integer",
    "long": "integer",
    "float": "number",
    "double": "number",
    "bool": "boolean",
    "str": "string",
    "dict": "object",
    "list": "array",
    "map": "object",
}


def _valid_type(kind: Any) -> bool:
    if isinstance(kind, str):
        return kind in _TYPES
    return isinstance(kind, list) and bool(kind) and all(isinstance(k, str) and k in _TYPES for k in kind)


def _clip(value: Any) -> Any:
    return value[:_MAX_TEXT_CHARS] if isinstance(value, str) else value


def walk_operations(document: SpecDocument) -> Iterator[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    """Every operation: ``(path, method, operation, path item)``, in document order."""
    for path, item in document.data.get("paths", {}).items():
        if isinstance(item, dict):
            for method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
                operation = item.get(method)
                if isinstance(operation, dict):
                    yield path, method, operation, item
