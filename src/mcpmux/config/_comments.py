"""Comment blocks in a ruamel.yaml round-trip tree: find, detach and re-attach them.

ruamel keeps the comment lines that follow a collection item on the item's deepest last block node
(or, after a flow collection, in the enclosing collections' ``ca.end``). Removing or appending
after the last item would therefore drop or misplace them; these helpers move them instead.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

__all__ = ["drop_heading", "indent_of", "put_block", "slot_token", "take_block", "token_text"]


def _slot(container: Any, key: Any) -> tuple[Any, Any, int]:
    """Where ruamel keeps the comment after ``container[key]``: its deepest last block node."""
    value = container[key]
    if isinstance(value, CommentedMap | CommentedSeq) and len(value) and not value.fa.flow_style():
        return _slot(value, _last_key(value))
    return container, key, 2 if isinstance(container, CommentedMap) else 0


def _last_key(container: Any) -> Any:
    return list(container)[-1] if isinstance(container, CommentedMap) else len(container) - 1


def _enclosing(container: Any, key: Any) -> list[Any]:
    """The collections that end right after ``container[key]``, innermost first.

    When the last value is a flow collection, ruamel keeps the following comments in their
    ``ca.end`` instead of on a node.
    """
    if not len(container) or key != _last_key(container):
        return []
    value = container[key]
    inner = []
    if isinstance(value, CommentedMap | CommentedSeq) and len(value) and not value.fa.flow_style():
        inner = _enclosing(value, _last_key(value))
    return [*inner, container]


def _take_end(node: Any) -> str:
    tokens = getattr(node.ca, "end", None) or []
    node.ca.end = None
    return "".join(token_text(t) for t in tokens)


def token_text(token: CommentToken) -> str:
    """A comment token as the lines it stands for (indented to its column)."""
    value = str(token.value)
    column = token.start_mark.column if token.start_mark is not None else 0
    return " " * column + value if value.startswith("#") else value


def slot_token(node: Any, key: Any, position: int) -> CommentToken | None:
    """The comment token at ``position`` of ``node.ca.items[key]``, if any."""
    entry = node.ca.items.get(key)
    return entry[position] if entry and len(entry) > position and entry[position] is not None else None


def take_block(container: Any, key: Any) -> str:
    """Detach the comment lines after ``container[key]``, leaving its end-of-line comment."""
    ends = "".join(_take_end(node) for node in _enclosing(container, key))
    node, slot_key, position = _slot(container, key)
    token = slot_token(node, slot_key, position)
    if token is None:
        return ends
    eol, _, block = str(token.value).partition("\n")
    if eol.strip():
        token.value = eol + "\n"
    else:
        node.ca.items[slot_key][position] = None
    return block + ends


def put_block(container: Any, key: Any, block: str) -> None:
    """Attach ``block`` (comment lines) after ``container[key]``, after its end-of-line comment."""
    if not block:
        return
    node, slot_key, position = _slot(container, key)
    token = slot_token(node, slot_key, position)
    if token is not None:
        token.value = str(token.value) + block
        return
    slots = node.ca.items.setdefault(slot_key, [None, None, None, None])
    slots[position] = CommentToken("\n" + block, CommentMark(0), None)


def drop_heading(block: str) -> str:
    """Drop the comment lines that sit directly on top of the next entry (they describe it)."""
    lines = block.splitlines(keepends=True)
    while lines and lines[-1].strip().startswith("#"):
        lines.pop()
    return "".join(lines)


def indent_of(block: str) -> int:
    """The indentation of the first line of ``block``."""
    first = block.splitlines()[0] if block else ""
    return len(first) - len(first.lstrip(" "))
