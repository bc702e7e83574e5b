"""The try-it form: fields from an input schema, and arguments of the schema's types read back."""

from __future__ import annotations

import pytest

from mcpmux.console.forms import RAW_FIELD, arguments_from, fields_of
from mcpmux.errors import UsageError

SCHEMA = {
    "type": "object",
    "properties": {
        "note": {"type": "string"},
        "path": {"type": "string", "description": "where"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": "number"},
        "force": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "safe"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "sizes": {"type": "array", "items": {"type": "integer"}},
        "options": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
    },
    "required": ["path", "mode"],
}


def test_fields_follow_the_schema_required_first() -> None:
    fields = fields_of(SCHEMA)
    assert [f.name for f in fields][:2] == ["path", "mode"]
    kinds = {f.name: f.kind for f in fields}
    assert kinds == {"path": "text", "mode": "enum", "note": "text", "count": "integer", "ratio": "number",
                     "force": "boolean", "tags": "lines", "sizes": "lines", "options": "json"}  # fmt: skip
    assert next(f for f in fields if f.name == "count").default == "3"


def test_arguments_are_converted_by_type_and_empty_optionals_left_out() -> None:
    form = {"arg.path": "/a", "arg.mode": "safe", "arg.note": "", "arg.count": "7", "arg.ratio": "0.5",
            "arg.force": "true", "arg.tags": "x\n\ny", "arg.sizes": "1\n2",
            "arg.options": '{"deep": true}'}  # fmt: skip
    assert arguments_from(form, fields_of(SCHEMA)) == {
        "path": "/a", "mode": "safe", "count": 7, "ratio": 0.5, "force": True, "tags": ["x", "y"],
        "sizes": [1, 2], "options": {"deep": True},
    }  # fmt: skip


def test_raw_json_replaces_the_form() -> None:
    assert arguments_from({RAW_FIELD: '{"a": [1]}', "arg.path": "x"}, fields_of(SCHEMA)) == {"a": [1]}


@pytest.mark.parametrize(
    ("form", "says"),
    [({"arg.count": "many"}, "'count'"), ({"arg.options": "{"}, "not valid JSON"), ({RAW_FIELD: "[1]"}, "object")],
)
def test_a_wrong_value_names_its_argument(form: dict[str, str], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        arguments_from({"arg.path": "p", "arg.mode": "fast", **form}, fields_of(SCHEMA))


def test_a_schema_without_properties_has_only_the_raw_box() -> None:
    assert fields_of({"type": "object"}) == []
    assert fields_of(None) == []
