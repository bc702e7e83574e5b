"""What a first sight costs the state database: one lookup and one insert per new tool, whatever the index.

A guarded listing of 5,000 new tools pins each one; every statement more is 5,000 more.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from mcpmux.manager.models import ToolInfo
from mcpmux.policy.pins import PinBook
from mcpmux.policy.store import StateStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as opened:
        yield opened


def tool(name: str) -> ToolInfo:
    return ToolInfo.make(name=f"a:{name}", server="a", tool=name, description="Reads.", input_schema={"type": "object"})


def test_a_new_tool_is_pinned_with_one_lookup_and_one_insert(store: StateStore) -> None:
    pins = PinBook(store, "tofu", {"a": "identity-of-a"})
    pins.check(tool("warm"))  # the one-time look for legacy rows
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        verdict = pins.check(tool("read"))
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    assert verdict.exposed
    assert verdict.pin is not None
    assert (verdict.pin.hash, verdict.pin.approved) == (pins.get("a", "read").hash, True)  # type: ignore[union-attr]
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    assert (len(selects), len(inserts)) == (1, 1), statements


def test_a_pin_another_process_made_first_stands(store: StateStore, tmp_path: Path) -> None:
    first = PinBook(store, "tofu", {"a": "identity-of-a"})
    with StateStore(tmp_path / "state.db") as other_store:
        other = PinBook(other_store, "tofu", {"a": "identity-of-a"})
        other.check(tool("read"))
        assert first.check(tool("read")).reason == "pinned"
