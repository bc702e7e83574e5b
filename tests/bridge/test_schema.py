"""Input schemas normalised per provider: refs inlined, unsupported keywords gone, objects on top."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from mcpmux.bridge.schema import normalise_schema

PYDANTIC_STYLE: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "Address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "zip": {"type": ["string", "null"], "default": None}},
            "required": ["street"],
            "additionalProperties": False,
        }
    },
    "type": "object",
    "properties": {
        "home": {"$ref": "#/$defs/Address", "description": "where they live"},
        "kind": {"const": "person"},
        "tags": {"type": "array"},
        "definitions": {"type": "string", "description": "a property that happens to be called so"},
    },
    "required": ["home", "missing"],
}

TREE: dict[str, Any] = {
    "type": "object",
    "properties": {"root": {"$ref": "#/definitions/Node"}},
    "definitions": {
        "Node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}},
            },
        }
    },
}


@pytest.mark.parametrize("profile", ["openai", "anthropic", "gemini", "mcp"])
@pytest.mark.parametrize("empty", [None, {}])
def test_a_missing_schema_becomes_an_empty_object_schema(profile: str, empty: dict[str, Any] | None) -> None:
    assert normalise_schema(empty, profile) == {"type": "object", "properties": {}}


@pytest.mark.parametrize("profile", ["openai", "anthropic", "gemini", "mcp"])
def test_the_input_is_never_mutated(profile: str) -> None:
    before = copy.deepcopy(PYDANTIC_STYLE)
    normalise_schema(PYDANTIC_STYLE, profile)
    assert before == PYDANTIC_STYLE


def test_openai_gets_refs_inlined_and_meta_keywords_dropped() -> None:
    schema = normalise_schema(PYDANTIC_STYLE, "openai")
    assert "$defs" not in json.dumps(schema)
    assert "$schema" not in schema
    home = schema["properties"]["home"]
    assert home["properties"]["street"] == {"type": "string"}
    assert home["description"] == "where they live"
    assert schema["properties"]["tags"] == {"type": "array", "items": {}}
    assert schema["properties"]["definitions"]["type"] == "string"


def test_a_recursive_reference_is_cut_with_a_note() -> None:
    schema = normalise_schema(TREE, "anthropic")
    children = schema["properties"]["root"]["properties"]["children"]
    assert children["items"]["type"] == "object"
    assert "recursive reference #/definitions/Node" in children["items"]["description"]
    assert "definitions" not in schema


def test_an_unresolvable_reference_becomes_a_permissive_object() -> None:
    schema = normalise_schema({"type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}, "openai")
    assert schema["properties"]["x"]["type"] == "object"
    assert "unresolvable reference" in schema["properties"]["x"]["description"]


def test_a_root_reference_is_followed_once() -> None:
    schema = normalise_schema({"type": "object", "properties": {"self": {"$ref": "#"}}}, "openai")
    assert schema["properties"]["self"]["type"] == "object"


def test_shared_definitions_cannot_explode_the_schema() -> None:
    defs = {
        f"L{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/L{i + 1}"}, "b": {"$ref": f"#/$defs/L{i + 1}"}},
        }
        for i in range(30)
    }
    defs["L30"] = {"type": "string"}
    schema = normalise_schema({"$defs": defs, "type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}}, "openai")
    assert len(json.dumps(schema)) < 1_000_000
    assert "schema too large" in json.dumps(schema)


@pytest.mark.parametrize("profile", ["openai", "gemini"])
def test_the_top_level_is_always_an_object(profile: str) -> None:
    assert normalise_schema({"properties": {"a": {"type": "string"}}}, profile)["type"] == "object"
    union = {
        "anyOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
        ]
    }
    merged = normalise_schema(union, profile)
    assert merged["type"] == "object"
    assert set(merged["properties"]) == {"a", "b"}
    assert "required" not in merged
    assert "anyOf" not in merged


def test_gemini_gets_its_openapi_subset() -> None:
    schema = normalise_schema(PYDANTIC_STYLE, "gemini")
    text = json.dumps(schema)
    for keyword in ("additionalProperties", "const", "$schema", "$defs", "default", '"null"'):
        assert keyword not in text
    home = schema["properties"]["home"]
    assert home["properties"]["zip"] == {"type": "string", "nullable": True}
    assert schema["properties"]["kind"] == {"type": "string", "enum": ["person"]}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert schema["required"] == ["home"]


def test_gemini_turns_nullable_unions_and_odd_enums_into_its_forms() -> None:
    schema = normalise_schema(
        {
            "type": "object",
            "properties": {
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "a count"},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "when": {"type": "string", "format": "date-time"},
                "url": {"type": "string", "format": "uri", "pattern": "^https://"},
                "mixed": {"type": ["string", "array"], "items": {"type": "integer"}},
            },
        },
        "gemini",
    )
    props = schema["properties"]
    assert props["maybe"] == {"type": "integer", "nullable": True, "description": "a count"}
    assert props["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["level"] == {"type": "integer", "description": "(one of: 1, 2, 3)"}
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["url"] == {"type": "string"}
    assert props["mixed"] == {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]}


def test_mcp_keeps_the_schema_but_fixes_the_top_level() -> None:
    schema = normalise_schema(PYDANTIC_STYLE, "mcp")
    assert schema["$defs"] == PYDANTIC_STYLE["$defs"]
    assert schema["properties"]["home"]["$ref"] == "#/$defs/Address"


def test_an_unknown_profile_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown schema profile"):
        normalise_schema({"type": "object"}, "cohere")


def test_a_top_level_reference_is_inlined() -> None:
    schema = {"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    assert normalise_schema(schema, "openai") == {"type": "object", "properties": {"q": {"type": "string"}}}


def test_the_result_shares_nothing_with_the_input() -> None:
    schema = {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"], "default": ["a"]}}}
    result = normalise_schema(schema, "openai")
    result["properties"]["mode"]["enum"].append("c")
    result["properties"]["mode"]["default"].append("b")
    assert schema["properties"]["mode"] == {"type": "string", "enum": ["a", "b"], "default": ["a"]}
