"""Read a dotenv file (``KEY=VALUE`` lines), as VS Code's ``envFile`` names one."""

from __future__ import annotations

import re
from pathlib import Path

from mcpmux.config.parse import read_text
from mcpmux.errors import ConfigError, ConfigProblem

__all__ = ["read_env_file"]

_LINE = re.compile(r"(?:export\s+)?(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(?P<value>.*)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of ``path``: ``KEY=VALUE`` lines, ``export`` allowed, ``#`` comments, quoted values.

    Raises:
        ConfigError: the file is missing, unreadable or too large, or a line is not ``KEY=VALUE``
            (each such line listed).
    """
    if not path.is_file():
        raise ConfigError(ConfigProblem(str(path), "", "envFile does not exist"))
    variables: dict[str, str] = {}
    problems = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _LINE.fullmatch(stripped)
        if match is None:
            problems.append(ConfigProblem(str(path), "", "expected KEY=VALUE", number))
            continue
        variables[match.group("key")] = _value(match.group("value"))
    if problems:
        raise ConfigError(problems)
    return variables


def _value(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1]
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw[1:-1])
    return re.sub(r"\s+#.*$", "", raw)  # an unquoted value ends at a comment
