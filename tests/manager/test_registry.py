"""The registry indexes one server at a time: after any sequence of re-lists and removals it holds
exactly what indexing every server from scratch, in configuration order, would hold."""

from __future__ import annotations

import mcp_types as types
from hypothesis import given, settings, strategies as st

from mcpmux.manager.registry import Registry, ServerCatalog, ToolSnapshot

SERVERS = ["a", "b", "c", "d"]
NAMESPACES = {"a": "a", "b": "shared", "c": "shared", "d": ""}


def catalog(tools: list[str], prompts: tuple[str, ...] | list[str] = ()) -> ServerCatalog:
    return ServerCatalog(
        tools=tuple(types.Tool(name=name, input_schema={"type": "object"}) for name in tools),
        prompts=tuple(types.Prompt(name=name) for name in prompts),
    )


def from_scratch(order: list[str], lists: dict[str, list[str]]) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """The index as the registry built it before: every server in order, the first claim wins."""
    held: dict[str, str] = {}
    conflicts: dict[str, list[str]] = {}
    for server in order:
        for tool in dict.fromkeys(lists.get(server, [])):
            name = f"{NAMESPACES[server]}:{tool}" if NAMESPACES[server] else tool
            if name not in held:
                held[name] = server
            elif held[name] != server:
                conflicts.setdefault(name, [held[name]]).append(server)
    return [(server, name) for name, server in held.items()], conflicts


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(SERVERS),
        st.one_of(st.none(), st.lists(st.sampled_from(["x", "y", "z", "w", "read"]), max_size=4)),
    ),
    max_size=14,
)


@settings(max_examples=300, deadline=None)
@given(operations=OPERATIONS)
def test_re_listing_one_server_at_a_time_equals_indexing_everything_again(
    operations: list[tuple[str, list[str] | None]],
) -> None:
    registry = Registry()
    order: list[str] = []
    lists: dict[str, list[str]] = {}
    for server, tools in operations:
        if tools is None:
            registry.remove_server(server)
            if server in order:
                order.remove(server)
            lists.pop(server, None)
            continue
        if server not in order:
            registry.add_server(server, NAMESPACES[server])
            order.append(server)
        registry.update(server, catalog(tools))
        lists[server] = tools
        expected_tools, expected_conflicts = from_scratch(order, lists)
        assert [(t.server, t.name) for t in registry.tools()] == expected_tools
        assert registry.conflicts() == expected_conflicts
        for server_name in order:
            assert [(t.server, t.name) for t in registry.tools(server_name)] == [
                pair for pair in expected_tools if pair[0] == server_name
            ]
        for held_by, name in expected_tools:
            assert registry.resolve_tool(name).server == held_by


def test_a_contested_name_passes_to_the_next_server_when_its_holder_stops_offering_it() -> None:
    registry = Registry()
    registry.add_server("first", "same")
    registry.add_server("second", "same")
    registry.update("second", catalog(["t"], ["p"]))
    registry.update("first", catalog(["t"], ["p"]))
    assert registry.resolve_tool("same:t").server == "first"
    assert registry.resolve_prompt("same:p").server == "first"
    both = ["first", "second"]
    assert registry.conflicts() == {"same:t": both, "same:get_prompt": both, "same:p": both}
    registry.update("first", catalog([]))
    assert registry.resolve_tool("same:t").server == "second"
    assert registry.resolve_prompt("same:p").server == "second"
    assert registry.conflicts() == {}


def test_the_whole_list_is_a_copy_tagged_with_a_version_that_changes_with_the_tools() -> None:
    registry = Registry()
    registry.add_server("a", "a")
    registry.update("a", catalog(["x", "y"]))
    listed = registry.tools()
    assert isinstance(listed, ToolSnapshot)
    assert listed.version is registry.tools().version
    listed.clear()
    assert len(registry.tools()) == 2
    registry.update("a", catalog(["x"]))
    assert registry.tools().version is not listed.version
