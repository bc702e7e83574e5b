"""The "try it" form: fields generated from a tool's ``inputSchema``, and arguments read back from them.

Strings, numbers, integers, booleans and enums get their own inputs; arrays of those get one item
per line; nested objects and anything else (``oneOf``, ``$ref``, arrays of objects) get a JSON box.
A "raw JSON" box replaces the whole form when filled. Values are converted by the property's type,
so what reaches the tool is what its schema asks for (the guard validates it again before sending).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcpmux.errors import UsageError

__all__ = ["RAW_FIELD", "Field", "arguments_from", "fields_of"]

RAW_FIELD = "raw_json"
PREFIX = "arg."
_SCALARS = ("string", "number", "integer", "boolean")


@dataclass(frozen=True, slots=True)
class Field:
    """One input of the form.

    Attributes:
        name: the argument's name.
        kind: ``text``, ``number``, ``integer``, ``boolean``, ``enum``, ``lines`` (an array of scalars,
            one per line) or ``json``.
        item_type: the scalar type of a ``lines`` field's items.
        required, description, default, options: from the schema.
    """

    name: str
    kind: str
    required: bool
    description: str
    default: str
    options: tuple[str, ...] = ()
    item_type: str = "string"

    @property
    def input_name(self) -> str:
        """The form field's name."""
        return PREFIX + self.name


def fields_of(schema: Mapping[str, Any] | None) -> list[Field]:
    """The form's fields for an object ``schema`` (required first, then in schema order)."""
    properties = (schema or {}).get("properties") or {}
    if not isinstance(properties, Mapping):
        return []
    required = set((schema or {}).get("required") or ())
    fields = [
        _field(str(name), prop if isinstance(prop, Mapping) else {}, name in required)
        for name, prop in properties.items()
    ]
    return sorted(fields, key=lambda f: not f.required)


def _field(name: str, prop: Mapping[str, Any], required: bool) -> Field:
    kind, item_type, options = _kind(prop)
    default = prop.get("default")
    shown = "" if default is None else (default if isinstance(default, str) else json.dumps(default))
    if kind == "lines" and isinstance(default, list):
        shown = "\n".join(str(v) for v in default)
    return Field(name, kind, required, str(prop.get("description") or ""), shown, options, item_type)


def _kind(prop: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    if isinstance(prop.get("enum"), list) and all(isinstance(v, str) for v in prop["enum"]):
        return "enum", "string", tuple(prop["enum"])
    kind = prop.get("type")
    if kind in _SCALARS:
        return ("text" if kind == "string" else str(kind)), str(kind), ()
    items = prop.get("items")
    if kind == "array" and isinstance(items, Mapping) and items.get("type") in _SCALARS:
        return "lines", str(items["type"]), ()
    return "json", "string", ()


def arguments_from(form: Mapping[str, str], fields: list[Field]) -> dict[str, Any]:
    """The tool's arguments from the submitted ``form`` (empty optional fields are left out).

    Raises:
        UsageError: a value is not of its field's type, or the raw JSON is not an object.
    """
    raw = form.get(RAW_FIELD, "").strip()
    if raw:
        value = _json(RAW_FIELD, raw)
        if not isinstance(value, dict):
            raise UsageError("the raw JSON arguments must be an object", hint='for example {"message": "hi"}')
        return value
    arguments: dict[str, Any] = {}
    for field in fields:
        text = form.get(field.input_name)
        if field.kind == "boolean":
            if text is not None or field.required:
                arguments[field.name] = text is not None
            continue
        if text is None or (text.strip() == "" and not (field.required and field.kind in ("text", "enum"))):
            continue
        arguments[field.name] = _convert(field, text)
    return arguments


def _convert(field: Field, text: str) -> Any:
    if field.kind in ("text", "enum"):
        return text
    if field.kind == "lines":
        return [_scalar(field.name, field.item_type, line) for line in text.splitlines() if line.strip()]
    if field.kind in ("number", "integer"):
        return _scalar(field.name, field.kind, text)
    return _json(field.name, text)


def _scalar(name: str, kind: str, text: str) -> Any:
    text = text.strip()
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            number = float(text)
            return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    except ValueError:
        raise UsageError(f"argument {name!r}: {text!r} is not a {kind}", hint=f"enter a {kind}") from None
    if kind == "boolean":
        return text.lower() in ("true", "1", "yes", "on")
    return text


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"argument {name!r} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
