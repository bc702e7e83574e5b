"""Tab completion in the chat: slash commands, then server, tool, prompt and resource names."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from mcpmux.chat.slash import TABLE, find
from mcpmux.policy import Guard

__all__ = ["ChatCompleter"]


class ChatCompleter(Completer):
    """Completes the word under the cursor from the slash table and the guard's current lists."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self._sources: dict[str, Callable[[list[str]], Iterable[str]]] = {
            "call": lambda _: (t.name for t in guard.tools()),
            "prompt": lambda _: (p.name for p in guard.prompts()),
            "read": self._read_words,
            "approve": lambda _: guard.servers,
            "login": lambda _: guard.servers,
            "mcp tools": lambda _: guard.servers,
            "mcp resources": lambda _: guard.servers,
            "mcp prompts": lambda _: guard.servers,
            "mcp refresh": lambda _: guard.servers,
        }

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        """The candidates for the word before the cursor."""
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        word = text.split(" ")[-1]
        for candidate in sorted(set(self._candidates(text))):
            if candidate.startswith(word) and candidate != word:
                yield Completion(candidate, start_position=-len(word))

    def _candidates(self, text: str) -> Iterable[str]:
        if " " not in text:
            return (f"/{name.split(' ')[0]}" for name in TABLE)
        head = text.rpartition(" ")[0]
        if head == "/mcp":
            return (name.split(" ")[1] for name in TABLE if name.startswith("mcp "))
        found = find(head)
        if found is None:
            return ()
        command, rest = found
        source = self._sources.get(command.name)
        words = rest.split()
        # Only the first argument is a name, except /read whose second is a URI of that server.
        if source is None or (len(words) > (1 if command.name == "read" else 0)):
            return ()
        return source(words)

    def _read_words(self, words: list[str]) -> Iterable[str]:
        if not words:
            return self._guard.servers
        return (r.uri for r in self._guard.resources(words[0]) if not r.template)
