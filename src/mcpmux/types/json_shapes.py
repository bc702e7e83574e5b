"""The JSON shapes every layer passes around, named once here at the bottom of the layers.

``JSONValue`` is exact; ``JSONObject`` and ``JSONSchema`` are the objects that cross module
boundaries (tool arguments, schemas, ``--json`` output, audit rows) and stay ``dict[str, Any]``
inside, because a schema or a server's answer is checked where it is used, not at every hop.
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["JSONObject", "JSONSchema", "JSONValue"]

JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = dict[str, Any]
"""A JSON object as parsed (tool arguments, structured content, a ``--json`` row)."""
JSONSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document (a tool's ``inputSchema`` or ``outputSchema``)."""
