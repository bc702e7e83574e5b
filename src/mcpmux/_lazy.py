"""Lazy package exports (PEP 562): a package lists its public names once; each module loads on first use.

The one list is the package's ``if TYPE_CHECKING:`` block of ``from MODULE import NAME as NAME``
lines: type checkers read it as ordinary re-exports, and :func:`lazy_exports` reads it (with
:mod:`ast`, on the first lazy lookup, not at import) to build the map ``__getattr__`` imports from.
``__all__`` comes from the same map.

A light path (``mcpmux --help``, ``mcpmux tools`` over a warm catalog) then never imports the MCP
SDK's client, which costs about 0.4 s, unless it really opens a connection.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

__all__ = ["lazy_exports", "type_checking_imports"]


def lazy_exports(
    package: str, init_file: str, *, also: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` of ``package`` from the ``TYPE_CHECKING`` imports of ``init_file``.

    ``__all__`` is served by ``__getattr__`` too: those names plus ``also`` (names the package
    defines itself, such as ``__version__``), sorted.
    """

    def __getattr__(name: str) -> Any:
        exports = type_checking_imports(init_file)
        if name == "__all__":
            value: Any = sorted([*exports, *also])
        elif name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted([*type_checking_imports(init_file), *also])

    return __getattr__, __dir__


@cache
def type_checking_imports(init_file: str) -> dict[str, str]:
    """``{name: module}`` for every ``from module import name`` under ``if TYPE_CHECKING:`` in ``init_file``."""
    import ast

    with open(init_file, encoding="utf-8") as source:
        tree = ast.parse(source.read(), init_file)
    exports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        exports[alias.asname or alias.name] = statement.module
    return exports
