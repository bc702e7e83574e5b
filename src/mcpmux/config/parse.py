"""Read a configuration file into plain data, with line numbers for every problem.

YAML is read with ruamel.yaml's round-trip loader, whose nodes remember their line and column, so a
validation problem deep in the tree can still name its line. JSON is read with the standard library;
JSONC (comments and trailing commas, as VS Code writes ``mcp.json``) is accepted.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedBase
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from mcpmux.config.bounds import MAX_CONFIG_BYTES, MAX_DEPTH, PathPart, check_tree, format_path
from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["PathPart", "format_path", "line_of", "load_yaml", "read_data", "read_text"]


def read_data(path: Path) -> Any:
    """Read ``path`` as YAML or JSON (by its suffix), decoding UTF-8 with or without a BOM.

    The file is read only up to :data:`~mcpmux.config.bounds.MAX_CONFIG_BYTES`, and the data it
    holds must stay within the bounds of :func:`~mcpmux.config.bounds.check_tree`.

    Raises:
        ConfigError: the file cannot be read, is not a regular file, is too large, is not UTF-8,
            is not valid YAML/JSON, or crosses a bound.
    """
    source = str(path)
    text = read_text(path)
    if path.suffix.lower() in (".json", ".jsonc"):
        tree = _read_json(text, source)
    else:
        tree = load_yaml(YAML(typ="rt"), text, source)
    check_tree(tree, source)
    return tree


def read_text(path: Path, *, keep_bom: bool = False) -> str:
    """The text of a configuration file, refusing what is not a regular file or is too large.

    A UTF-8 byte order mark is dropped unless ``keep_bom``.

    Raises:
        ConfigError: unreadable, not a regular file (a FIFO or a device would block or never end),
            larger than ``MAX_CONFIG_BYTES``, or not UTF-8.
    """
    source = str(path)
    try:
        with path.open("rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise ConfigError(ConfigProblem(source, "", "not a regular file"))
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(ConfigProblem(source, "", f"cannot read file: {exc.strerror or exc}")) from exc
    if len(data) > MAX_CONFIG_BYTES:
        reason = f"larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB; not a configuration file mcpmux will read"
        raise ConfigError(ConfigProblem(source, "", reason))
    try:
        return data.decode("utf-8" if keep_bom else "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(ConfigProblem(source, "", f"not UTF-8 text (byte {exc.start})")) from exc


def _read_json(text: str, source: str) -> Any:
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        problem = ConfigProblem(source, "", f"invalid JSON: {exc.msg}", exc.lineno, exc.colno)
        raise ConfigError(problem) from exc
    except RecursionError as exc:
        raise ConfigError(ConfigProblem(source, "", f"invalid JSON: nested deeper than {MAX_DEPTH} levels")) from exc
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise ConfigError(ConfigProblem(source, "", f"invalid JSON: {exc}")) from exc


# Linear on any input: an unterminated comment or string runs to the end of its text (or line),
# instead of being retried from every later "/*" or quote (quadratic on "/*/*/*...").
_JSONC_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*(?:.*?\*/|.*)|,(?=[ \t\r\n]*[}\]])', re.DOTALL)


def _strip_jsonc(text: str) -> str:
    """Blank out comments and trailing commas (keeping newlines, so line numbers hold)."""

    def blank(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith('"'):
            return token
        return re.sub(r"[^\n]", " ", token)

    return _JSONC_TOKENS.sub(blank, text)


def load_yaml(yaml: YAML, text: str, source: str) -> Any:
    """``yaml.load(text)`` with every failure of the parser as a :class:`ConfigError`.

    Raises:
        ConfigError: invalid YAML, nested too deep for the parser, or an integer too long to convert.
    """
    _check_flow_depth(text, source)
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
    except RecursionError as exc:
        raise ConfigError(ConfigProblem(source, "", f"invalid YAML: nested deeper than {MAX_DEPTH} levels")) from exc
    except ValueError as exc:  # ruamel converts integers with int(), which refuses thousands of digits
        raise ConfigError(ConfigProblem(source, "", f"invalid YAML: {exc}")) from exc


# Brackets outside quoted scalars and comments (which start a token): how deep the flow collections of a YAML text nest.
_FLOW_TOKENS = re.compile(r"""(?<![^\s\[\]{},:])(?:"(?:[^"\\\n]|\\.)*"?|'[^'\n]*'?)|(?<!\S)#[^\n]*|[\[\]{}]""")


def _check_flow_depth(text: str, source: str) -> None:
    """Refuse deeply nested flow collections before the parser sees them.

    ruamel.yaml parses nesting recursively and slowly: 1,000 levels of ``[`` take it seconds
    before it gives up with a RecursionError. The scan is linear; a bracket counts only where a
    flow collection can start (after a delimiter or an opening bracket that counted), so one
    inside a plain scalar such as ``http://x/#[a]`` does not.
    """
    depth, counted = 0, -2
    for match in _FLOW_TOKENS.finditer(text):
        token, start = match.group(0), match.start()
        before = text[start - 1] if start else "\n"
        if token in ("[", "{"):
            if (before in "[{" and counted != start - 1) or not (before.isspace() or before in "[{,:"):
                continue
            depth, counted = depth + 1, start
            if depth > MAX_DEPTH:
                reason = f"invalid YAML: nested deeper than {MAX_DEPTH} levels"
                raise ConfigError(ConfigProblem(source, "", reason, text.count("\n", 0, start) + 1))
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)


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
