"""Read a configuration file into plain data, with line numbers for every problem.

YAML is read with ruamel.yaml's round-trip loader, whose nodes remember their line and column, so a
validation problem deep in the tree can still name its line. JSON is read with the standard library;
JSONC (comments and trailing commas, as VS Code writes ``mcp.json``) is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["PathPart", "format_path", "line_of", "read_data"]

PathPart = str | int


def read_data(path: Path) -> Any:
    """Read ``path`` as YAML or JSON (by its suffix), decoding UTF-8 with or without a BOM.

    Raises:
        ConfigError: the file cannot be read, is not UTF-8, or is not valid YAML/JSON.
    """
    source = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ConfigError(ConfigProblem(source, "", f"cannot read file: {exc.strerror or exc}")) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(ConfigProblem(source, "", f"not UTF-8 text (byte {exc.start})")) from exc
    if path.suffix.lower() in (".json", ".jsonc"):
        return _read_json(text, source)
    return _read_yaml(text, source)


def _read_json(text: str, source: str) -> Any:
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        problem = ConfigProblem(source, "", f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)
        raise ConfigError(problem) from exc


_JSONC_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def _strip_jsonc(text: str) -> str:
    """Blank out comments and trailing commas (keeping newlines, so line numbers hold)."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return token
        return re.sub(r"[^\n]", " ", token)

    return _JSONC_TOKENS.sub(blank, text)


def _read_yaml(text: str, source: str) -> Any:
    yaml = YAML(typ="rt")
    try:
        return yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        reason = f"invalid YAML: {exc.problem or exc.context or 'syntax error'}"
        raise ConfigError(ConfigProblem(source, "", reason, line, column)) from exc
    except YAMLError as exc:
        raise ConfigError(ConfigProblem(source, "", f"invalid YAML: {exc}")) from exc


def format_path(parts: Sequence[PathPart]) -> str:
    """``("mcp", "servers", 2, "url")`` -> ``mcp.servers[2].url``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def line_of(data: Any, parts: Sequence[PathPart]) -> tuple[int | None, int | None]:
    """The 1-based line and column of the deepest node along ``parts`` that the YAML tree knows."""
    node, found = data, (None, None)
    for part in parts:
        if not isinstance(node, CommentedBase):
            break
        try:
            if isinstance(node, dict) and part in node:
                line, col = node.lc.key(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                line, col = node.lc.item(part)
            else:
                break
        except (KeyError, IndexError, TypeError):
            break
        found = (line + 1, col + 1)
        node = node[part]
    return found
