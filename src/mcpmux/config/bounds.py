"""Bounds on what a configuration file may hold, so a hostile file is a :class:`ConfigError`, fast.

The project's ``mcpmux.yaml`` is read by every command, so a repository can hand mcpmux any file.
A file is refused, with its path, when it is larger than :data:`MAX_CONFIG_BYTES`, when its data
nests deeper than :data:`MAX_DEPTH` (a YAML alias that refers to itself nests without end), when it
holds more than :data:`MAX_VALUES` values counting every YAML alias as the copy it stands for (a
"billion laughs" bomb is a few lines that stand for billions of values), when a mapping key is not
text, when an integer does not fit in 64 bits, and when a value is not plain data (YAML tags for
dates, sets, binary or unknown types). The walk is iterative and stops at the first bound it
crosses, so checking costs at most :data:`MAX_VALUES` steps whatever the file says.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["MAX_CONFIG_BYTES", "MAX_DEPTH", "MAX_INT_BITS", "MAX_VALUES", "PathPart", "check_tree", "format_path"]

MAX_CONFIG_BYTES = 8 * 1024 * 1024
"""Largest configuration file read (Claude Code's ``~/.claude.json`` keeps history and grows)."""
MAX_DEPTH = 64
MAX_VALUES = 200_000
MAX_INT_BITS = 64
_MAX_PROBLEMS = 20
_SHOWN_CHARS = 40

PathPart = str | int
_Path = tuple[PathPart, ...]


def check_tree(tree: Any, source: str) -> None:
    """Refuse ``tree`` (just parsed from ``source``) if it crosses any bound.

    Raises:
        ConfigError: every offending key or value (the first 20), or the bound crossed.
    """
    problems: list[ConfigProblem] = []
    stack: list[tuple[Any, _Path]] = [(tree, ())]
    seen = 0
    while stack:
        node, path = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            reason = (
                f"more than {MAX_VALUES} values, counting each YAML alias as a copy of what it names "
                "(an alias bomb?); refusing to read it"
            )
            raise ConfigError(ConfigProblem(source, "", reason))
        if len(path) > MAX_DEPTH:
            reason = f"nested deeper than {MAX_DEPTH} levels (or a YAML alias that contains itself)"
            raise ConfigError(ConfigProblem(source, _shown_path(path[:8]) + "...", reason))
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    stack.append((value, (*path, key)))
                else:
                    problems.append(ConfigProblem(source, _shown_path(path), _key_reason(key)))
        elif isinstance(node, list):
            stack.extend((value, (*path, index)) for index, value in enumerate(node))
        else:
            scalar_reason = _scalar_reason(node)
            if scalar_reason is not None:
                problems.append(ConfigProblem(source, _shown_path(path), scalar_reason))
        if len(problems) >= _MAX_PROBLEMS:
            break
    if problems:
        raise ConfigError(problems)


def _scalar_reason(value: Any) -> str | None:
    if value is None or isinstance(value, str | bool):
        return None
    if isinstance(value, int):
        if value.bit_length() >= MAX_INT_BITS:
            return f"integer out of range ({value.bit_length()} bits; at most {MAX_INT_BITS - 1})"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a usable number"
    return f"unsupported value of type {type(value).__name__} (only text, numbers, true/false, lists and mappings)"


def _key_reason(key: Any) -> str:
    if key is None:
        kind = "null"
    elif isinstance(key, bool):
        kind = "a boolean"
    elif isinstance(key, int | float):
        kind = "a number"
    else:
        kind = f"a {type(key).__name__}"
    return f"mapping key {_short(key)} is {kind}, not text (quote it)"


def _short(value: Any) -> str:
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<{value.bit_length()}-bit integer>"
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def _shown_path(path: _Path) -> str:
    return format_path(path)


def format_path(parts: Sequence[PathPart]) -> str:
    """``("mcp", "servers", 2, "url")`` -> ``mcp.servers[2].url``."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif not isinstance(part, str):
            out += f"[{json.dumps(str(part))}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out
