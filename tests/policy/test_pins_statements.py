"""What a first sight costs the state database: one lookup and one insert per new tool, whatever the index;
and a guarded listing: one read of each server's pins, one write of each server's first listing.

A guarded listing of 5,000 new tools pins each one; a statement per tool is 5,000 statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import mcp_types as types
import pytest
from sqlalchemy import event

from mcpmux.config.models import Config, StdioServerConfig
from mcpmux.manager import Manager
from mcpmux.manager.registry import ServerCatalog
from mcpmux.policy import Guard
from mcpmux.policy.pins import PinBook
from mcpmux.policy.store import StateStore
from mcpmux.types.models import ToolInfo


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


def listed_guard(store: StateStore, tools_per_server: int) -> Guard:
    """A guard over two servers whose lists are fed to the index (no server process)."""
    config = Config(servers=(StdioServerConfig(name="a", command="true"), StdioServerConfig(name="b", command="true")))
    manager = Manager(config, catalog=False, start=False)
    for server in ("a", "b"):
        manager.registry.add_server(server, server)
        listed = tuple(
            types.Tool(name=f"{server}_tool_{i}", description=f"Tool {i}.", input_schema={"type": "object"})
            for i in range(tools_per_server)
        )
        manager.registry.update(server, ServerCatalog(tools=listed))
    return Guard(manager, store=store)


def statements_of(store: StateStore, action: Callable[[], object]) -> list[str]:
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement.lstrip().split()[0].upper())

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        action()
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    return statements


@pytest.mark.parametrize("tools_per_server", [3, 40])
def test_a_first_guarded_listing_costs_the_same_statements_whatever_the_tool_count(
    tmp_path: Path, tools_per_server: int
) -> None:
    # Per server: its pins read once, its first listing written in one transaction (not one per tool).
    with StateStore(tmp_path / "state.db") as store:
        guard = listed_guard(store, tools_per_server)
        statements = statements_of(store, guard.tools)
        assert len(guard.tools()) == 2 * tools_per_server
        assert all(pin.approved for pin in guard.pins.pins())
        assert len(guard.pins.pins()) == 2 * tools_per_server
        again = statements_of(store, guard.tools)
    assert statements.count("INSERT") == 2 * 2, statements  # the tool seen first, then the rest of its listing
    assert statements.count("SELECT") <= 2 * 4 + 1, statements
    assert again == []  # nothing changed: nothing asked


def test_a_listing_reads_each_servers_pins_once(tmp_path: Path) -> None:
    with StateStore(tmp_path / "state.db") as store:
        listed_guard(store, 30).tools()
        fresh = listed_guard(store, 30)  # another process: every pin is there, none cached
        statements = statements_of(store, fresh.tools)
    assert statements.count("SELECT") == 2, statements
    assert "INSERT" not in statements
