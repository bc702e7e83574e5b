"""Lazy package exports (PEP 562): a package lists its public names once; each module loads on first use.

The one list is the package's ``if TYPE_CHECKING:`` block of ``from MODULE import NAME as NAME``
lines: type checkers read it as ordinary re-exports, and :func:`lazy_exports` reads it (with
:mod:`ast`, once, when the package is imported) to build the map that ``__getattr__`` imports from.

A light path (``mcpmux --help``, ``mcpmux tools`` over a warm catalog) then never imports the MCP
SDK's client, which costs about 0.4 s, unless it really opens a connection.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` of ``package``: the ``TYPE_CHECKING`` imports of ``init_file``."""
    exports = type_checking_imports(init_file)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)


def type_checking_imports(init_file: str) -> dict[str, str]:
    """``{name: module}`` for every ``from module import name`` under ``if TYPE_CHECKING:`` in ``init_file``."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"), init_file)
    exports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        exports[alias.asname or alias.name] = statement.module
    return exports
