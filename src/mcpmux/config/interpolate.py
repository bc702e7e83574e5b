"""``${VAR}`` and ``${VAR:-default}`` expansion, with ``$$`` as a literal ``$``.

Expansion applies to a server's ``env``, ``headers``, ``args`` and ``url`` only (DESIGN section 3).
VS Code's ``${env:VAR}`` spelling is accepted too; ``${input:ID}`` reads ``MCPMUX_INPUT_<ID>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Expansion", "MissingVariable", "expand", "input_variable"]

_TOKEN = re.compile(r"\$\$|\$\{(?P<body>[^}]*)\}")
_NAME = re.compile(r"(?:env:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)
_INPUT = re.compile(r"input:(?P<id>[A-Za-z0-9_.-]+)")


@dataclass(frozen=True, slots=True)
class MissingVariable:
    """A reference that could not be expanded: the variable is unset and has no default."""

    name: str
    reason: str


@dataclass(slots=True)
class Expansion:
    """The outcome of expanding one string."""

    value: str
    substituted: list[tuple[str, str]] = field(default_factory=list)
    missing: list[MissingVariable] = field(default_factory=list)


def input_variable(input_id: str) -> str:
    """The environment variable that answers a VS Code ``${input:ID}`` prompt."""
    return "MCPMUX_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


def expand(text: str, environ: Mapping[str, str]) -> Expansion:
    """Expand every reference in ``text`` from ``environ``.

    Returns the expanded text, the ``(variable, value)`` pairs substituted and the
    references that could not be resolved, which stay in the text as written. A malformed
    ``${...}`` is reported as missing.
    """
    result = Expansion(value="")

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        body = match.group("body")
        if (inp := _INPUT.fullmatch(body)) is not None:
            var = input_variable(inp.group("id"))
            if var in environ:
                result.substituted.append((var, environ[var]))
                return environ[var]
            result.missing.append(MissingVariable(var, f"input {inp.group('id')!r} is not set: export {var}"))
            return match.group(0)
        parsed = _NAME.fullmatch(body)
        if parsed is None:
            result.missing.append(MissingVariable(body, f"malformed reference ${{{body}}}"))
            return match.group(0)
        name, default = parsed.group("name"), parsed.group("default")
        value = environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                result.missing.append(MissingVariable(name, f"environment variable {name} is not set"))
                return match.group(0)
            return default
        result.substituted.append((name, value))
        return value

    result.value = _TOKEN.sub(substitute, text)
    return result
