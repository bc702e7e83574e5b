"""What hash pinning alone misses: renamed tools, tools added later, and changes nobody can see.

A pin covers one name. A server that drops ``read_notes`` and lists ``read_notes_v2`` with the
same (or nearly the same) definition gets a fresh pin for the new name under trust on first use:
the rename slips past the pin. A description that gains a zero-width space, a bidi control or a
tag character (U+E0000 block, used to smuggle ASCII) hashes differently, but its diff looks empty
to a person. This module names both, so the quarantine reason and the diff say what happened:

- :func:`rename_source` finds the vanished tool a new one most resembles (``renamed from X``);
- :func:`invisible_change` says when two definitions differ only in invisible or look-alike
  (NFKC-equivalent) characters, listing the code points;
- :func:`reveal` shows invisible characters as ``<U+200B ZERO WIDTH SPACE>`` in text a person reads.
"""

from __future__ import annotations

import difflib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping

from mcpmux.types.json_shapes import JSONObject

__all__ = [
    "RENAME_CANDIDATES",
    "RENAME_SIMILARITY",
    "invisible_change",
    "is_invisible",
    "rename_source",
    "reveal",
    "visible_form",
]

RENAME_SIMILARITY = 0.9
"""How alike (``difflib`` ratio of the canonical JSON's tokens, without the name) a vanished tool's definition
and a new one must be for the new one to count as its rename."""

# Zero-width and joiner characters, bidi embeddings/overrides/isolates, the BOM, invisible math
# operators, Mongolian vowel separator, soft hyphen, Hangul fillers: all render as nothing (or
# reorder what follows) in most terminals and model tokenisers see them.
_TOKEN = re.compile(r"\w+|[^\w\s]")
RENAME_CANDIDATES = 3
"""How many vanished tools (the closest by a cheap bound) are compared with a newcomer in full."""

_INVISIBLE = frozenset(
    [
        *(0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x3164, 0xFEFF, 0xFFA0),
        *range(0x200B, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2060, 0x2070),
        *range(0xFE00, 0xFE10),
    ]
)


def is_invisible(char: str) -> bool:
    """Whether ``char`` renders as nothing (or only reorders text): zero-width, bidi, tag, format characters."""
    code = ord(char)
    if code in _INVISIBLE or 0xE0000 <= code <= 0xE007F or 0xE0100 <= code <= 0xE01EF:
        return True
    return unicodedata.category(char) == "Cf"


def visible_form(text: str) -> str:
    """``text`` without invisible characters, NFKC-normalised (look-alike compatibility forms folded)."""
    if text.isascii():  # nothing invisible, nothing to fold: the common case, kept cheap
        return text
    return unicodedata.normalize("NFKC", "".join(c for c in text if not is_invisible(c)))


def _name(char: str) -> str:
    code = ord(char)
    if 0xE0020 <= code <= 0xE007E:
        return f"TAG {chr(code - 0xE0000)!r}"
    return unicodedata.name(char, "UNNAMED")


def reveal(text: str) -> str:
    """``text`` with each invisible or NFKC-unstable (look-alike) character shown as ``<U+XXXX NAME>``."""
    return "".join(f"<U+{ord(c):04X} {_name(c)}>" if _hidden(c) else c for c in text)


def _hidden(char: str) -> bool:
    if char.isascii():
        return False
    return is_invisible(char) or (not char.isspace() and unicodedata.normalize("NFKC", char) != char)


def _strings(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _folded(definition: JSONObject) -> str:
    return visible_form(_canonical(definition))


def invisible_change(before: JSONObject, after: JSONObject) -> str | None:
    """Why ``after`` differs from ``before`` if only invisible or look-alike characters changed, else ``None``.

    The reason lists the invisible code points ``after`` gained (at most eight, then a count) or says
    the change folds away under NFKC (look-alike characters such as fullwidth letters).
    """
    if before == after or _folded(before) != _folded(after):
        return None
    old = {c for text in _strings(before) for c in text if is_invisible(c)}
    added = sorted({c for text in _strings(after) for c in text if is_invisible(c)} - old)
    if added:
        shown = ", ".join(f"U+{ord(c):04X} {_name(c)}" for c in added[:8])
        more = f" and {len(added) - 8} more" if len(added) > 8 else ""
        return f"changed only in invisible characters: {shown}{more}"
    stripped = ("".join(c for c in t if not is_invisible(c)) for t in (_canonical(before), _canonical(after)))
    if len(set(stripped)) == 1:
        return "changed only in invisible characters (removed or moved)"
    return "changed only in look-alike characters (equal after NFKC normalisation)"


def _canonical(definition: JSONObject) -> str:
    return json.dumps(definition, sort_keys=True, ensure_ascii=False)


def _without_name(definition: JSONObject) -> str:
    rest = {k: v for k, v in definition.items() if k not in ("name", "title")}
    return _folded(rest)


def rename_source(new: JSONObject, vanished: Mapping[str, JSONObject]) -> tuple[str, float] | None:
    """The vanished tool ``new`` most resembles, and how much (1.0: identical but for the name).

    ``vanished`` maps the names of pinned tools the server no longer lists to their pinned
    definitions. Occurrences of the old name in the old definition count as the new name. A match
    needs :data:`RENAME_SIMILARITY` or more; ties go to the first name in order. Only the
    :data:`RENAME_CANDIDATES` closest by ``difflib``'s cheap bound are compared in full, so a
    server that drops hundreds of look-alike tools costs a bounded time per newcomer.
    """
    target, new_name = _without_name(new), str(new.get("name", ""))
    texts: dict[str, list[str]] = {}
    for name in sorted(vanished):
        # Frameworks derive text from the name (the SDK's schema title "read_notesArguments"): a
        # rename changes it too, so the old name is read as the new one before comparing.
        text = _without_name(vanished[name])
        text = text.replace(name, new_name) if new_name else text
        if text == target:
            return name, 1.0
        texts[name] = _TOKEN.findall(text)
    # Compared as word and punctuation tokens: as telling as characters, and far fewer.
    matcher: difflib.SequenceMatcher[str] = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(_TOKEN.findall(target))
    bounds = []
    for name, tokens in texts.items():
        matcher.set_seq1(tokens)
        if matcher.real_quick_ratio() >= RENAME_SIMILARITY and (bound := matcher.quick_ratio()) >= RENAME_SIMILARITY:
            bounds.append((-bound, name))
    best: tuple[str, float] | None = None
    for _, name in sorted(bounds)[:RENAME_CANDIDATES]:
        matcher.set_seq1(texts[name])
        ratio = matcher.ratio()
        if ratio >= RENAME_SIMILARITY and (best is None or ratio > best[1]):
            best = (name, ratio)
    return best
