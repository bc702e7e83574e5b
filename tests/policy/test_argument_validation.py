"""Arguments checked against the tool's inputSchema before sending: real servers, and the checker alone.

Against server-filesystem and server-everything through :class:`mcpmux.Host`: a call whose
arguments miss the schema is refused with an error naming the argument, what was expected and
what was given, leaves an ``invalid`` audit row and never reaches the server; ``validate: false``
on the server (or ``validate=False`` on the call) sends it anyway, and the server's own answer
comes back.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from mcpmux import Host, InvalidArguments
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.manager import ToolInfo
from mcpmux.policy import StateStore
from mcpmux.policy.validation import ArgumentCheck, plain_check
from tests.peers.fixtures import stdio_command

DEADLINE_S = 60


def server(name: str, peer: str, *args: str, validate: bool = True) -> StdioServerConfig:
    command, argv = stdio_command(peer, *args)
    return StdioServerConfig.model_validate({"name": name, "command": command, "args": argv, "validate": validate})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def config(*servers: StdioServerConfig) -> Config:
    return Config(servers=servers, security=SecurityConfig(pinning="off"))


@pytest.mark.anyio
@pytest.mark.peers
async def test_filesystem_arguments_of_the_wrong_type_are_refused_before_sending(
    tmp_path: Path, store: StateStore
) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with anyio.fail_after(DEADLINE_S):
        async with Host(config(server("fs", "filesystem", str(tmp_path))), store=store, catalog=False) as host:
            with pytest.raises(InvalidArguments) as caught:
                await host.call_tool("fs:read_text_file", {"path": 42})
            problem = caught.value.problems[0]
            assert (problem.path, problem.expected, problem.given) == ("path", "type 'string'", "42")
            assert "argument 'path': expected type 'string', got 42" in str(caught.value)
            assert caught.value.hint and "--no-validate" in caught.value.hint

            with pytest.raises(InvalidArguments, match="argument 'path': expected a required argument, got nothing"):
                await host.call_tool("fs:read_text_file", {})
            with pytest.raises(InvalidArguments, match=r"argument 'edits\[0\]\.newText': expected a required"):
                await host.call_tool("fs:edit_file", {"path": str(tmp_path / "a.txt"), "edits": [{"oldText": "h"}]})
            assert (tmp_path / "a.txt").read_text() == "hello\n"  # nothing reached the server

            rows = host.audit.query(limit=10)
            assert [(r.tool, r.decision, r.outcome) for r in rows[:3]] == [
                ("edit_file", "invalid", "refused"),
                ("read_text_file", "invalid", "refused"),
                ("read_text_file", "invalid", "refused"),
            ]
            assert "expected type 'string', got 42" in rows[2].rule

            good = await host.call_tool("fs:read_text_file", {"path": str(tmp_path / "a.txt")})
            assert not good.is_error


@pytest.mark.anyio
@pytest.mark.peers
async def test_validate_false_sends_what_the_schema_refuses_and_the_server_answers(
    tmp_path: Path, store: StateStore
) -> None:
    servers = (server("fs", "filesystem", str(tmp_path), validate=False), server("ev", "everything"))
    with anyio.fail_after(DEADLINE_S):
        async with Host(config(*servers), store=store, catalog=False) as host:
            # The server's own validation answers instead (an error result, not ours).
            sent = await host.call_tool("fs:read_text_file", {"path": 42})
            assert sent.is_error
            assert host.audit.query(limit=1)[0].outcome == "tool-error"

            with pytest.raises(InvalidArguments, match="argument 'b': expected type 'number', got \"3\""):
                await host.call_tool("ev:get-sum", {"a": 2, "b": "3"})
            unchecked = await host.call_tool("ev:get-sum", {"a": 2, "b": "3"}, validate=False)
            assert unchecked.is_error  # everything's zod schema refuses it too, on its side


# -- the checker alone -----------------------------------------------------------------------------


def tool(schema: dict[str, Any]) -> ToolInfo:
    return ToolInfo.make(name="s:t", server="s", tool="t", input_schema=schema)


def problems(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    try:
        ArgumentCheck()(tool(schema), arguments)
    except InvalidArguments as exc:
        return [str(p) for p in exc.problems]
    return []


def test_refs_into_defs_are_followed() -> None:
    schema = {
        "type": "object",
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}},
        "properties": {"at": {"$ref": "#/$defs/point"}},
    }
    assert problems(schema, {"at": {"x": 1}}) == []
    assert problems(schema, {"at": {"x": 1.5}}) == ["argument 'at.x': expected type 'integer', got 1.5"]


def test_cheap_formats_enums_and_bounds_are_checked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string", "format": "date"},
            "mode": {"enum": ["fast", "slow"]},
            "n": {"type": "integer", "minimum": 1},
        },
    }
    assert problems(schema, {"when": "2026-11-24", "mode": "fast", "n": 1}) == []
    assert problems(schema, {"when": "yesterday", "mode": "quick", "n": 0}) == [
        'argument \'mode\': expected one of ["fast", "slow"], got "quick"',
        "argument 'n': expected a number >= 1, got 0",
        "argument 'when': expected a string in format 'date', got \"yesterday\"",
    ]


def test_unknown_names_are_named_when_the_schema_closes_the_object() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": False}
    assert problems(schema, {"path": "a", "pth": "b"}) == [
        "argument 'pth': expected only path (no other names), got an argument"
    ]


def test_an_older_draft_is_honoured_when_the_schema_names_it() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {}}}
    assert problems(schema, {"a": 1}) == []


def test_a_schema_that_cannot_be_used_does_not_block_the_call(caplog: pytest.LogCaptureFixture) -> None:
    assert problems({"type": "object", "properties": {"a": {"type": "no-such-type"}}}, {"a": 1}) == []
    assert problems({"type": "object", "properties": {"a": {"$ref": "https://example.invalid/s.json"}}}, {"a": 1}) == []
    assert "invalid input schema" in caplog.text and "cannot resolve" in caplog.text


PRIMITIVES = ["string", "boolean", "integer", "number", "null"]
_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3))


@st.composite
def flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4))
    kinds = {
        n: draw(st.one_of(st.sampled_from(PRIMITIVES), st.lists(st.sampled_from(PRIMITIVES), min_size=1, max_size=2)))
        for n in names
    }
    schema: dict[str, Any] = {"type": "object", "properties": {n: {"type": k} for n, k in kinds.items()}}
    schema["required"] = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@settings(max_examples=300, deadline=None)
@given(flat_schemas(), st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), _values, max_size=5))
def test_the_plain_check_never_calls_invalid_arguments_valid(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    import jsonschema

    plain = plain_check(schema)
    assert plain is not None
    truth = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    if plain(arguments):
        assert truth, (schema, arguments)
    elif truth:  # only a type overlap jsonschema allows (1.0 as an integer) may be left to it
        assert any(isinstance(v, float) and v.is_integer() for v in arguments.values()), (schema, arguments)


def test_the_plain_check_leaves_anything_richer_to_jsonschema() -> None:
    assert plain_check({"type": "object", "properties": {"p": {"type": "string", "format": "email"}}}) is None
    assert plain_check({"type": "object", "properties": {"p": {"type": "array", "items": {}}}}) is None
    assert plain_check({"type": "object", "properties": {"p": {"enum": [1, 2]}}}) is None
    assert plain_check({"type": "object", "$defs": {}}) is None
