"""A configuration document in mcpmux's shape before validation: its server entries, sections and problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcpmux.config.bounds import PathPart, format_path
from mcpmux.errors import ConfigProblem

__all__ = ["Document", "RawServer"]


@dataclass(slots=True)
class RawServer:
    """One server entry in mcpmux's shape, and where it came from in its file."""

    origin: tuple[PathPart, ...]
    data: dict[str, Any]


@dataclass(slots=True)
class Document:
    """A configuration file turned into mcpmux's shape, not yet validated."""

    source: str
    kind: str
    tree: Any
    servers: list[RawServer] = field(default_factory=list)
    sections: dict[str, tuple[tuple[PathPart, ...], Any]] = field(default_factory=dict)
    problems: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)

    def warn(self, origin: tuple[PathPart, ...], reason: str) -> None:
        self.warnings.append(ConfigProblem(self.source, format_path(origin), reason))

    def problem(self, origin: tuple[PathPart, ...], reason: str) -> None:
        self.problems.append(ConfigProblem(self.source, format_path(origin), reason))
