"""Call arguments checked against the tool's ``inputSchema`` before anything is sent.

::

    check = ArgumentCheck()
    check(tool, {"path": 3})   # raises InvalidArguments: argument 'path': expected type 'string', got 3

JSON Schema 2020-12 by default (a schema's own ``$schema`` picks an older draft), local ``$ref``s
and ``$defs`` resolved, the formats that cost nothing to check (date, email, ipv4/6, uuid, regex,
...). Nothing is fetched: a ``$ref`` to another document cannot be resolved, and neither it nor a
schema that is itself invalid blocks a call; the server then judges the arguments alone (logged
once per tool). Compiled validators are kept per definition, so a re-listed tool is checked
against what its server says now.

Most tools take a flat object of strings, numbers and booleans. For such a schema a precompiled
check (:func:`plain_check`) proves valid arguments valid without running the JSON Schema machinery
(about a tenth of its cost); anything it cannot prove goes to the full validator, which alone
decides what is invalid and says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing.exceptions

from mcpmux.errors import ArgumentProblem, InvalidArguments
from mcpmux.manager import ToolInfo

__all__ = ["ArgumentCheck", "problems_of"]

log = logging.getLogger(__name__)

CACHE_LIMIT = 4096
GIVEN_LIMIT = 80
MAX_PROBLEMS = 20


class ArgumentCheck:
    """Validates arguments against tool schemas, compiling each schema once."""

    def __init__(self) -> None:
        # id(schema dict) -> (schema, validator or None when the schema cannot be used, plain check)
        self._validators: dict[int, tuple[object, Any, PlainCheck | None]] = {}

    def __call__(self, tool: ToolInfo, arguments: Mapping[str, Any]) -> None:
        """Raise :class:`InvalidArguments` if ``arguments`` do not match ``tool``'s input schema."""
        validator, plain = self._validator(tool)
        if validator is None or (plain is not None and plain(arguments)):
            return
        try:
            if validator.is_valid(arguments):  # stop at the first failed check, collect nothing
                return
            problems = problems_of(validator.iter_errors(dict(arguments)))
        except referencing.exceptions.Unresolvable as exc:
            self._give_up(tool, f"its schema has a $ref mcpmux cannot resolve ({exc})")
            return
        if problems:
            raise InvalidArguments(tool.server, tool.tool, problems)

    def _validator(self, tool: ToolInfo) -> tuple[Any, PlainCheck | None]:
        schema = tool.input_schema
        cached = self._validators.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1], cached[2]
        if len(self._validators) > CACHE_LIMIT:  # re-listed servers leave old schemas behind
            self._validators.clear()
        validator: Any = None
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            log.warning(
                "server %r: tool %r has an invalid input schema (%s); its arguments are not checked",
                tool.server, tool.tool, exc.message,
            )  # fmt: skip
        else:
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        plain = plain_check(schema) if validator is not None else None
        self._validators[id(schema)] = (schema, validator, plain)
        return validator, plain

    def _give_up(self, tool: ToolInfo, why: str) -> None:
        log.warning("server %r: tool %r: %s; its arguments are not checked", tool.server, tool.tool, why)
        self._validators[id(tool.input_schema)] = (tool.input_schema, None, None)


PlainCheck = Callable[[Mapping[str, Any]], bool]
"""True when the arguments are certainly valid; False means "ask the full validator"."""

# Keywords that never make an instance invalid.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated", "readOnlyHint"})
_PLAIN_TOP = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_PLAIN_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def plain_check(schema: Mapping[str, Any]) -> PlainCheck | None:
    """A fast proof of validity for a flat object schema of primitive properties, or ``None``.

    The schema qualifies when it says only ``type: object``, ``properties`` whose schemas say only
    a primitive ``type`` (or a list of them) and annotations, ``required`` and a boolean
    ``additionalProperties``. Anything else (formats, enums, bounds, nesting) is left to jsonschema.
    """
    if not set(schema) <= _PLAIN_TOP or schema.get("type", "object") != "object":
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(extra, bool):
        return None
    checks: dict[str, Callable[[object], bool]] = {}
    for name, sub in properties.items():
        kinds = sub.get("type") if isinstance(sub, dict) else None
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not isinstance(sub, dict) or not set(sub) <= _ANNOTATIONS | {"type"} or not isinstance(kinds, list):
            return None
        if not kinds or not all(isinstance(k, str) and k in _PLAIN_TYPES for k in kinds):
            return None
        checks[name] = _any_of([_PLAIN_TYPES[k] for k in kinds])
    needed = tuple(required)

    def check(arguments: Mapping[str, Any]) -> bool:
        if not all(name in arguments for name in needed):
            return False
        for name, value in arguments.items():
            test = checks.get(name)
            if test is None:
                if not extra:
                    return False
            elif not test(value):
                return False
        return True

    return check


def _any_of(tests: list[Callable[[object], bool]]) -> Callable[[object], bool]:
    if len(tests) == 1:
        return tests[0]
    return lambda value: any(test(value) for test in tests)


def problems_of(errors: Iterable[jsonschema.exceptions.ValidationError]) -> list[ArgumentProblem]:
    """One :class:`ArgumentProblem` per leaf error, deepest first, in argument order."""
    leaves: list[jsonschema.exceptions.ValidationError] = []
    for error in errors:
        leaves.extend(_leaves(error))
        if len(leaves) >= MAX_PROBLEMS:
            break
    leaves.sort(key=lambda e: [str(p) for p in e.absolute_path])
    return [_problem(e) for e in leaves[:MAX_PROBLEMS]]


def _leaves(error: jsonschema.exceptions.ValidationError) -> list[jsonschema.exceptions.ValidationError]:
    # anyOf/oneOf: report the branch that came closest (best_match), not every branch's complaint.
    if error.context:
        best = jsonschema.exceptions.best_match(error.context)
        if best is not None and best.absolute_path != error.absolute_path:
            return _leaves(best)
    return [error]


def _problem(error: jsonschema.exceptions.ValidationError) -> ArgumentProblem:
    path = _path(error.absolute_path)
    keyword, value = error.validator, error.validator_value
    given: str | None = _shorten(error.instance)
    if keyword == "required":
        missing = _missing(error)
        return ArgumentProblem(_join(path, missing), "a required argument", None)
    if keyword == "additionalProperties" or keyword == "unevaluatedProperties":
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        names = schema.get("properties") or {}
        instance = error.instance if isinstance(error.instance, dict) else {}
        extra, allowed = sorted(set(instance) - set(names)), sorted(names)
        known = f"only {', '.join(allowed)}" if allowed else "no arguments"
        return ArgumentProblem(_join(path, extra[0]) if extra else path, f"{known} (no other names)", "an argument")
    expected = _expected(str(keyword), value, error.message)
    return ArgumentProblem(path, expected, given)


def _missing(error: jsonschema.exceptions.ValidationError) -> str:
    # "'path' is a required property": the name is the one required key absent from the instance.
    instance = error.instance if isinstance(error.instance, dict) else {}
    required = error.validator_value if isinstance(error.validator_value, list) else []
    absent = [str(name) for name in required if name not in instance]
    return absent[0] if absent else ""


def _expected(keyword: str, value: object, message: str) -> str:
    simple = {
        "type": lambda: f"type {_types(value)}",
        "enum": lambda: f"one of {_shorten(value)}",
        "const": lambda: f"exactly {_shorten(value)}",
        "format": lambda: f"a string in format {value!r}",
        "pattern": lambda: f"a string matching {value!r}",
        "minimum": lambda: f"a number >= {value}",
        "maximum": lambda: f"a number <= {value}",
        "exclusiveMinimum": lambda: f"a number > {value}",
        "exclusiveMaximum": lambda: f"a number < {value}",
        "minLength": lambda: f"a string of at least {value} characters",
        "maxLength": lambda: f"a string of at most {value} characters",
        "minItems": lambda: f"at least {value} items",
        "maxItems": lambda: f"at most {value} items",
        "multipleOf": lambda: f"a multiple of {value}",
    }
    make = simple.get(keyword)
    return make() if make is not None else f"a value satisfying {keyword!r} ({message})"


def _types(value: object) -> str:
    if isinstance(value, list):
        return " or ".join(repr(v) for v in value)
    return repr(value)


def _path(parts: Iterable[object]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _join(path: str, name: str) -> str:
    if not name:
        return path
    return f"{path}.{name}" if path else name


def _shorten(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= GIVEN_LIMIT else text[: GIVEN_LIMIT - 3] + "..."
