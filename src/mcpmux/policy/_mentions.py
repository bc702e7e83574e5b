"""Finding other tools' names in text: set lookups, built once per index of tools.

The scanner flags a description that mentions a tool of another server (cross-tool shadowing).
A name counts as mentioned when it stands as a whole word: not preceded by a word character,
``:``, ``.`` or ``-``, and not followed by a word character or ``-``. Among names matching at the
same place the longest wins (a canonical ``mail:send_email`` over the bare ``send_email``), and
the leftmost place wins.

One regular expression alternating over every name costs time in proportion to the number of
names for every string scanned (33 ms per tool at 5,000 tools). Here a name is looked up by its
first segment (up to its first character that is neither a word character nor ``-``): each text
is cut at those characters once, and every place a name may start costs one dictionary lookup,
whatever the number of names.

::

    matcher = MentionMatcher(["mail:send_email", "send_email"])
    matcher.search("then call send_email.")   # Mention(name='send_email', start=10, end=20)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["MARKS", "MIN_NAME_CHARS", "Mention", "MentionMatcher", "MentionSearch", "is_distinctive", "might_mention"]

MIN_NAME_CHARS = 4
MARKS = ":_-."
"""A bare name with none of these could be an ordinary word, so it is not looked for."""

# What ends a name's segment: a mention ends before one (or at the end of the text), and starts at
# the beginning of the text or after one that is not ":" or "." (the scanner's historical
# ``(?<![\w:.-])...(?![\w-])`` around an alternation of names).
_END = re.compile(r"[^\w-]")
_MARK = re.compile(r"[:_.-]")


@dataclass(frozen=True, slots=True)
class Mention:
    """A name found in a text, at ``text[start:end]``."""

    name: str
    start: int
    end: int


MentionSearch = Callable[[str], Mention | None]
"""The first mention in a text, or ``None``."""


def is_distinctive(name: str) -> bool:
    """Whether ``name`` is worth looking for: long enough and not an ordinary word."""
    return len(name) >= MIN_NAME_CHARS and _MARK.search(name) is not None


def might_mention(text: str) -> bool:
    """Whether ``text`` could mention any name worth looking for (it has one of the :data:`MARKS`)."""
    return _MARK.search(text) is not None


class MentionMatcher:
    """The names to look for, grouped by first segment, longest first within a group.

    Args:
        names: names that are :func:`is_distinctive` (others are ignored).
    """

    __slots__ = ("_cores", "_heads")

    def __init__(self, names: Iterable[str]) -> None:
        heads: dict[str, list[str]] = {}
        for name in set(names):
            if is_distinctive(name):
                heads.setdefault(_head(name), []).append(name)
        for group in heads.values():
            group.sort(key=len, reverse=True)
        self._heads = heads
        self._cores = _cores(heads)

    def __bool__(self) -> bool:
        return bool(self._heads)

    def changed(self, added: Iterable[str], removed: Iterable[str]) -> MentionMatcher:
        """A new matcher: these names, less ``removed``, plus ``added`` (this one is left as it is)."""
        heads = dict(self._heads)  # shared groups, each copied before it changes
        copied: set[str] = set()
        for names, adding in ((removed, False), (added, True)):
            for name in names:
                if not is_distinctive(name):
                    continue
                head = _head(name)
                if head not in copied:
                    heads[head] = list(heads.get(head, ()))
                    copied.add(head)
                group = heads[head]
                if adding and name not in group:
                    group.append(name)
                elif not adding and name in group:
                    group.remove(name)
        for head in copied:
            if heads[head]:
                heads[head].sort(key=len, reverse=True)
            else:
                del heads[head]
        matcher = MentionMatcher(())
        matcher._heads, matcher._cores = heads, _cores(heads)
        return matcher

    def search(self, text: str, accept: Callable[[str], bool] | None = None) -> Mention | None:
        """The leftmost, then longest, mention in ``text`` of a name that ``accept`` (if given) takes."""
        heads = self._heads
        if not heads or not might_mention(text) or self._cores.isdisjoint(_END.split(text)):
            return None  # most texts: no run of word characters in them starts a name
        size = len(text)
        ends = [match.start() for match in _END.finditer(text)]
        ends.append(size)
        for index in range(-1, len(ends) - 1):
            # A mention starts at 0 or right after a segment end other than ":" or ".".
            if index < 0:
                start = 0
            elif text[ends[index]] in ":.":
                continue
            else:
                start = ends[index] + 1
            if start >= size:
                break
            after = index + 1
            if ends[after] == start:  # the text at ``start`` is itself a segment end
                after += 1
            group = heads.get(text[start : ends[after]])
            if group is None:
                continue
            for name in group:
                end = start + len(name)
                if (
                    text.startswith(name, start)
                    and (end == size or _END.match(text, end) is not None)
                    and (accept is None or accept(name))
                ):
                    return Mention(name, start, end)
        return None


def _cores(heads: Iterable[str]) -> frozenset[str]:
    # Every head a search looks up is a run of the text between segment ends (cut by ``_END.split``),
    # or one segment end followed by such a run: without that first character, it is one of the runs.
    return frozenset(head[1:] if _END.match(head) else head for head in heads)


def _head(name: str) -> str:
    # In a text where ``name`` matches at i, the first segment end after i is i + len(head).
    end = _END.search(name, 1)
    return name if end is None else name[: end.start()]
