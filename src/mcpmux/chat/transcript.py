"""What was said in a chat, saved as markdown or JSON (``/save FILE``)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

__all__ = ["Entry", "Transcript"]

Role = Literal["user", "assistant", "tool", "command", "prompt"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing said: by the user, the model, a tool call, or a slash command and its output."""

    role: Role
    text: str
    name: str | None = None
    at: float = field(default_factory=time.time)


class Transcript:
    """The entries of one chat, in order."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, role: Role, text: str, name: str | None = None) -> None:
        """Record one entry."""
        self.entries.append(Entry(role, text, name))

    def clear(self) -> None:
        """Forget everything."""
        self.entries.clear()

    def save(self, path: Path, *, model: str | None) -> str:
        """Write JSON when ``path`` ends with ``.json``, else markdown; return the format used."""
        if path.suffix.lower() == ".json":
            data = {"model": model, "entries": [asdict(e) for e in self.entries]}
            path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            return "json"
        path.write_text(self.markdown(model), encoding="utf-8")
        return "markdown"

    def markdown(self, model: str | None) -> str:
        """The transcript as a markdown document."""
        lines = [f"# mcpmux chat{f' with {model}' if model else ''}", ""]
        for entry in self.entries:
            if entry.role in ("user", "assistant"):
                lines += [f"**{entry.role}:**", "", entry.text, ""]
            else:
                lines += [
                    f"**{entry.role}{f' {entry.name}' if entry.name else ''}:**",
                    "",
                    "```",
                    entry.text,
                    "```",
                    "",
                ]
        return "\n".join(lines)
