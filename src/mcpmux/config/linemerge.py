"""Merge an edit into the user's text line by line, so only the edited lines change.

ruamel.yaml re-emits a whole document in its own way (multi-line flow mappings joined, comment
columns moved). Given the user's ``original`` text, ruamel's rendering of it before the edit
(``base``) and after (``edited``), :func:`merge_edit` applies the ``base -> edited`` change onto
``original``: lines the edit did not touch stay the user's own bytes.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

__all__ = ["merge_edit"]


def merge_edit(original: str, base: str, edited: str) -> str:
    """Apply the change from ``base`` to ``edited`` onto ``original``, line by line.

    ``base`` is ruamel's rendering of ``original`` before the edit. Lines the edit did not touch
    come from ``original``; a changed line that falls in a region ruamel rendered differently from
    the user takes that whole region from ``edited``.
    """
    o_lines, b_lines, e_lines = (t.splitlines(keepends=True) for t in (original, base, edited))
    # Lines equal but for spacing are equal: ruamel moves end-of-line comments when it re-emits.
    o_keys, b_keys, e_keys = ([" ".join(line.split()) for line in lines] for lines in (o_lines, b_lines, e_lines))
    to_orig = _boundaries(b_keys, o_keys)
    to_edit = _boundaries(b_keys, e_keys)
    regions = _anchored_regions(b_keys, e_keys, to_orig)
    out: list[str] = []
    cursor = 0
    for start, end in regions:
        out += o_lines[cursor : min(to_orig[start])]
        replaced = o_lines[min(to_orig[start]) : max(to_orig[end])]
        out += [_comment_gap_like(line, replaced) for line in e_lines[min(to_edit[start]) : max(to_edit[end])]]
        cursor = max(to_orig[end])
    out += o_lines[cursor:]
    return "".join(out)


_EOL_COMMENT = re.compile(r"(?<=\S)( +)(#[^\n]*)$")


def _comment_gap_like(line: str, replaced: list[str]) -> str:
    """Give an edited line's end-of-line comment the spacing the user gave it."""
    match = _EOL_COMMENT.search(line.rstrip("\n"))
    if match is None:
        return line
    for old in replaced:
        found = _EOL_COMMENT.search(old.rstrip("\r\n"))
        if found is not None and found.group(2) == match.group(2):
            return line[: match.start(1)] + found.group(1) + line[match.start(2) :]
    return line


def _boundaries(a: list[str], b: list[str]) -> dict[int, list[int]]:
    """Line boundaries of ``a`` that align with a boundary of ``b`` (all candidates)."""
    table: dict[int, list[int]] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        pairs = zip(range(i1, i2 + 1), range(j1, j2 + 1), strict=True) if tag == "equal" else [(i1, j1), (i2, j2)]
        for i, j in pairs:
            table.setdefault(i, []).append(j)
    return table


def _anchored_regions(base: list[str], edited: list[str], to_orig: dict[int, list[int]]) -> list[tuple[int, int]]:
    hunks = [
        (i1, i2)
        for tag, i1, i2, _, _ in SequenceMatcher(None, base, edited, autojunk=False).get_opcodes()
        if tag != "equal"
    ]
    regions: list[tuple[int, int]] = []
    for i1, i2 in hunks:
        start = max(b for b in to_orig if b <= i1)
        end = min(b for b in to_orig if b >= i2)
        if regions and start <= regions[-1][1]:
            start = regions.pop()[0]
        regions.append((start, end))
    return regions
