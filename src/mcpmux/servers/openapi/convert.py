"""OpenAPI operations -> MCP tools: one tool per operation, one JSON Schema input per tool.

A tool is named after its ``operationId`` (else ``method_path``), mapped onto ``[A-Za-z0-9_-]``,
at most 64 characters (a stable hash suffix when shortened), unique within the document. Its input
merges the parameters (path, query, header, cookie) and the request body: a JSON object body whose
properties collide with no parameter is flattened into the input, any other body is the ``body``
argument. The :class:`Operation` keeps where each argument goes, so executing needs no guessing.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urljoin

from mcp_types import Tool, ToolAnnotations

from mcpmux.errors import SpecError
from mcpmux.servers.openapi.document import SpecDocument
from mcpmux.servers.openapi.schemas import RefResolver, walk_operations

__all__ = [
    "MAX_OPERATIONS",
    "MAX_TOOL_NAME_CHARS",
    "BodyBinding",
    "Operation",
    "OperationFilter",
    "ParamBinding",
    "ParamLocation",
    "api_key_scheme",
    "convert",
    "document_base_url",
]

MAX_OPERATIONS = 2_000
MAX_TOOL_NAME_CHARS = 64
_MAX_DESCRIPTION_CHARS = 4_000
_HASH_CHARS = 8
# Set by the HTTP client or from the body: an argument must not override them.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type"})
_JSON_TYPES = ("application/json",)
_FORM = "application/x-www-form-urlencoded"
_MULTIPART = "multipart/form-data"
_BODY_METHODS = ("post", "put", "patch")

ParamLocation = Literal["path", "query", "header", "cookie"]


@dataclass(frozen=True)
class ParamBinding:
    """Where one argument goes: the parameter ``name`` in ``location``."""

    arg: str
    name: str
    location: ParamLocation


@dataclass(frozen=True)
class BodyBinding:
    """Where the request body comes from.

    Attributes:
        media_type: the body's media type (``application/json``, a form, ``text/plain``, ...).
        arg: the argument holding the whole body, or ``None`` when its properties are flattened.
        fields: the flattened properties (each an argument of the same name).
    """

    media_type: str
    arg: str | None
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    """One operation, as a tool and as the recipe of its HTTP request."""

    name: str
    method: str
    path: str
    operation_id: str | None
    description: str
    input_schema: dict[str, Any]
    params: tuple[ParamBinding, ...]
    body: BodyBinding | None
    tags: tuple[str, ...] = ()
    servers: tuple[str, ...] = ()
    summary: str = ""
    required: tuple[str, ...] = field(default=())

    @property
    def read_only(self) -> bool:
        """GET and HEAD change nothing (``readOnlyHint``)."""
        return self.method in ("get", "head")

    def to_tool(self) -> Tool:
        """The MCP tool definition of this operation."""
        annotations = ToolAnnotations(
            title=self.summary or None,
            read_only_hint=self.read_only,
            destructive_hint=self.method == "delete",
            idempotent_hint=self.method in ("get", "head", "put", "delete", "options"),
            open_world_hint=True,
        )
        return Tool(
            name=self.name, description=self.description, input_schema=self.input_schema, annotations=annotations
        )


@dataclass(frozen=True)
class OperationFilter:
    """Which operations become tools: tags and operationId globs to include (empty: all) and exclude."""

    include_tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    include_operations: tuple[str, ...] = ()
    exclude_operations: tuple[str, ...] = ()

    def admits(self, operation: Operation) -> bool:
        """``True`` when ``operation`` passes the filter."""
        ids = [i for i in (operation.operation_id, operation.name) if i]
        if self.include_tags and not set(operation.tags) & set(self.include_tags):
            return False
        if self.include_operations and not any(fnmatch.fnmatchcase(i, g) for i in ids for g in self.include_operations):
            return False
        if set(operation.tags) & set(self.exclude_tags):
            return False
        return not any(fnmatch.fnmatchcase(i, g) for i in ids for g in self.exclude_operations)


def convert(
    document: SpecDocument,
    selection: OperationFilter | None = None,
    *,
    auth_headers: frozenset[str] = frozenset(),
    max_operations: int = MAX_OPERATIONS,
) -> list[Operation]:
    """Every operation of ``document`` that ``selection`` admits, as :class:`Operation`.

    Args:
        document: the parsed document.
        selection: include/exclude rules (default: every operation).
        auth_headers: lower-case header names the source's auth sets; parameters of those names are
            not arguments (the credential comes from the source, never from the caller).
        max_operations: a document with more operations is refused.

    Raises:
        SpecError: more than ``max_operations`` operations, or a bad ``$ref``.
    """
    found = list(walk_operations(document))
    if len(found) > max_operations:
        raise SpecError(
            document.source, "paths", f"{len(found)} operations, more than {max_operations}: split the document"
        )
    resolver = RefResolver(document)
    taken: set[str] = set()
    chosen = selection or OperationFilter()
    out = []
    for path, method, operation, item in found:
        resolver.new_tool()
        converted = _operation(resolver, path, method, operation, item, taken, auth_headers)
        if chosen.admits(converted):
            out.append(converted)
    return out


def _operation(
    resolver: RefResolver,
    path: str,
    method: str,
    operation: dict[str, Any],
    item: dict[str, Any],
    taken: set[str],
    auth_headers: frozenset[str],
) -> Operation:
    where = f"paths.{path}.{method}"
    operation_id = operation.get("operationId") if isinstance(operation.get("operationId"), str) else None
    name = _unique(_tool_name(operation_id or f"{method}_{path}"), taken)
    builder = _InputBuilder(resolver, where)
    for param in _parameters(resolver, operation, item, where):
        builder.add_parameter(param, auth_headers)
    for variable in re.findall(r"{([^{}]+)}", path):
        builder.ensure_path_variable(variable)
    body = _body(resolver, builder, method, operation, where)
    summary = _string(operation.get("summary"))
    tags = (
        tuple(t for t in operation.get("tags", ()) if isinstance(t, str))
        if isinstance(operation.get("tags"), list)
        else ()
    )
    return Operation(
        name=name,
        method=method,
        path=path,
        operation_id=operation_id,
        description=_description(summary, operation.get("description"), method, path),
        input_schema=builder.schema(),
        params=tuple(builder.params),
        body=body,
        tags=tags,
        servers=_server_urls(operation.get("servers") or item.get("servers"), resolver.document),
        summary=summary.strip()[:200],
        required=tuple(builder.required),
    )


class _InputBuilder:
    """Collects the properties of one tool's input schema and where each goes."""

    def __init__(self, resolver: RefResolver, where: str) -> None:
        self.resolver, self.where = resolver, where
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.params: list[ParamBinding] = []

    def add_parameter(self, param: dict[str, Any], auth_headers: frozenset[str]) -> None:
        location, name = param.get("in"), param.get("name")
        if location not in ("path", "query", "header", "cookie") or not isinstance(name, str):
            return
        if location == "header" and (name.lower() in _RESERVED_HEADERS or name.lower() in auth_headers):
            return
        arg = self._free(name, location)
        schema = self._param_schema(param)
        if isinstance(param.get("description"), str) and "description" not in schema:
            schema["description"] = param["description"][:_MAX_DESCRIPTION_CHARS]
        self.add(arg, schema, required=location == "path" or param.get("required") is True)
        self.params.append(ParamBinding(arg=arg, name=name, location=location))

    def ensure_path_variable(self, name: str) -> None:
        if not any(p.location == "path" and p.name == name for p in self.params):
            arg = self._free(name, "path")
            self.add(arg, {"type": "string"}, required=True)
            self.params.append(ParamBinding(arg=arg, name=name, location="path"))

    def add(self, arg: str, schema: Any, *, required: bool) -> None:
        self.properties[arg] = schema
        if required and arg not in self.required:
            self.required.append(arg)

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "properties": self.properties}
        if self.required:
            out["required"] = list(self.required)
        return out

    def _free(self, name: str, location: str) -> str:
        if name not in self.properties:
            return name
        candidate = f"{location}_{name}"
        while candidate in self.properties:
            candidate += "_"
        return candidate

    def _param_schema(self, param: dict[str, Any]) -> dict[str, Any]:
        if "schema" in param:
            return self.resolver.schema(param["schema"], self.where)
        content = param.get("content")
        if isinstance(content, dict) and content:
            media = next(iter(content.values()))
            return self.resolver.schema(media.get("schema", {}) if isinstance(media, dict) else {}, self.where)
        # Swagger 2.0: the schema keywords sit on the parameter itself.
        keys = (
            "type",
            "format",
            "items",
            "enum",
            "default",
            "minimum",
            "maximum",
            "pattern",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "uniqueItems",
            "exclusiveMinimum",
            "exclusiveMaximum",
        )
        return self.resolver.schema({k: param[k] for k in keys if k in param}, self.where)


def _parameters(
    resolver: RefResolver, operation: dict[str, Any], item: dict[str, Any], where: str
) -> list[dict[str, Any]]:
    """Path-item parameters overridden by the operation's own (same name and location)."""
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}
    for source in (item.get("parameters"), operation.get("parameters")):
        for index, raw in enumerate(source if isinstance(source, list) else []):
            param = resolver.deref(raw, f"{where}.parameters[{index}]")
            if isinstance(param, dict):
                merged[(param.get("name"), param.get("in"))] = param
    return list(merged.values())


def _body(
    resolver: RefResolver, builder: _InputBuilder, method: str, operation: dict[str, Any], where: str
) -> BodyBinding | None:
    if resolver.document.version == "2.0":
        media_type, schema, required = _swagger_body(resolver, operation, where)
    else:
        media_type, schema, required = _openapi3_body(resolver, operation, where)
    if media_type is None:
        if method not in _BODY_METHODS:
            return None
        # Many documents leave the body of a POST undeclared; the caller may still send JSON.
        media_type, schema, required = (
            "application/json",
            {"description": "Request body (JSON); the document declares none"},
            False,
        )
    properties = _flat_properties(builder, media_type, schema)
    if properties is not None:
        inner_required = schema.get("required", []) if required else []
        for name, sub in properties.items():
            if not (isinstance(sub, dict) and sub.get("readOnly") is True):
                builder.add(name, sub, required=name in inner_required)
        return BodyBinding(
            media_type=media_type, arg=None, fields=tuple(n for n in properties if n in builder.properties)
        )
    arg = "body" if "body" not in builder.properties else "request_body"
    builder.add(arg, schema, required=required)
    return BodyBinding(media_type=media_type, arg=arg)


def _flat_properties(builder: _InputBuilder, media_type: str, schema: Any) -> dict[str, Any] | None:
    """The body's properties when they can be the tool's own arguments (a plain JSON or form object whose
    names no parameter takes); ``None``: the body is one argument."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return None
    plain = not any(k in schema for k in ("allOf", "anyOf", "oneOf"))
    free = not any(name in builder.properties for name in properties)
    flat_media = "json" in media_type or media_type in (_FORM, _MULTIPART)
    return properties if plain and free and flat_media else None


def _openapi3_body(resolver: RefResolver, operation: dict[str, Any], where: str) -> tuple[str | None, Any, bool]:
    if "requestBody" not in operation:
        return None, None, False
    body = resolver.deref(operation["requestBody"], f"{where}.requestBody")
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, dict) or not content:
        return None, None, False
    media_type = _preferred_media(list(content))
    media = content[media_type]
    raw = media.get("schema", {}) if isinstance(media, dict) else {}
    return media_type, resolver.schema(raw, f"{where}.requestBody"), bool(body.get("required"))


def _swagger_body(resolver: RefResolver, operation: dict[str, Any], where: str) -> tuple[str | None, Any, bool]:
    """A Swagger 2.0 operation's body: its ``in: body`` parameter, else its ``formData`` ones as one object."""
    params = _swagger_params(resolver, operation, where)
    consumes = operation.get("consumes") or resolver.document.data.get("consumes") or []
    param = next((p for p in params if p.get("in") == "body"), None)
    if param is not None:
        media_type = _preferred_media(_strings(consumes) or ["application/json"])
        body = resolver.schema(param.get("schema", {}), f"{where}.parameters")
        return media_type, body, bool(param.get("required"))
    form = [p for p in params if p.get("in") == "formData" and isinstance(p.get("name"), str)]
    if not form:
        return None, None, False
    multipart = _MULTIPART in consumes or any(p.get("type") == "file" for p in form)
    return (_MULTIPART if multipart else _FORM), _form_schema(resolver, form, where), True


def _swagger_params(resolver: RefResolver, operation: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """A Swagger 2.0 operation's parameters, references resolved (anything but an object left out)."""
    listed = operation.get("parameters")
    if not isinstance(listed, list):
        return []
    return [p for p in (resolver.deref(p, where) for p in listed) if isinstance(p, dict)]


def _form_schema(resolver: RefResolver, form: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """A Swagger 2.0 operation's ``formData`` parameters as one object schema."""
    properties = {}
    for p in form:
        keys = ("type", "format", "items", "enum", "default", "description")
        properties[p["name"]] = resolver.schema({k: p[k] for k in keys if k in p}, f"{where}.parameters")
    required = [p["name"] for p in form if p.get("required") is True]
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _preferred_media(types: list[str]) -> str:
    lowered = [t.lower() for t in types]
    for wanted in (
        lambda t: t.split(";")[0] in _JSON_TYPES,
        lambda t: "json" in t,
        lambda t: t.startswith(_FORM),
        lambda t: t.startswith(_MULTIPART),
        lambda t: t.startswith("text/"),
    ):
        for original, low in zip(types, lowered, strict=True):
            if wanted(low):
                return original
    return types[0]


def _strings(values: list[Any]) -> list[str]:
    return [v for v in values if isinstance(v, str)]


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _tool_name(raw: str) -> str:
    name = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_-]+", "_", raw)).strip("_-") or "operation"
    if len(name) > MAX_TOOL_NAME_CHARS:
        digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:_HASH_CHARS]
        name = f"{name[: MAX_TOOL_NAME_CHARS - _HASH_CHARS - 1]}_{digest}"
    return name


def _unique(name: str, taken: set[str]) -> str:
    candidate, counter = name, 2
    while candidate in taken:
        suffix = f"_{counter}"
        candidate = name[: MAX_TOOL_NAME_CHARS - len(suffix)] + suffix
        counter += 1
    taken.add(candidate)
    return candidate


def _description(summary: str, description: Any, method: str, path: str) -> str:
    parts = [summary.strip()] if summary.strip() else []
    if isinstance(description, str) and description.strip() and description.strip() != summary.strip():
        parts.append(description.strip())
    text = "\n\n".join(parts)[:_MAX_DESCRIPTION_CHARS]
    return (text + "\n\n" if text else "") + f"HTTP {method.upper()} {path}"


def document_base_url(document: SpecDocument) -> str | None:
    """The service URL the document names (its first server; Swagger's scheme, host and basePath).

    A relative URL is resolved against the URL the document was fetched from; ``None`` when the
    document names none (a ``base_url`` must then be given).
    """
    urls = _server_urls(document.data.get("servers"), document)
    if document.version != "2.0":
        return urls[0] if urls else (document.url and urljoin(document.url, "/"))
    data = document.data
    base_path = data.get("basePath") if isinstance(data.get("basePath"), str) else "/"
    host = data.get("host") if isinstance(data.get("host"), str) else None
    if host is None:
        return urljoin(document.url, base_path) if document.url else None
    schemes = (
        [s for s in data.get("schemes", []) if s in ("http", "https")] if isinstance(data.get("schemes"), list) else []
    )
    scheme = "https" if "https" in schemes or not schemes else schemes[0]
    return f"{scheme}://{host}{base_path}"


def _server_urls(servers: Any, document: SpecDocument) -> tuple[str, ...]:
    out = []
    for server in servers if isinstance(servers, list) else []:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str):
            continue
        url = server["url"]
        variables = server.get("variables")
        for name, variable in variables.items() if isinstance(variables, dict) else []:
            default = variable.get("default") if isinstance(variable, dict) else None
            url = url.replace("{" + name + "}", str(default) if default is not None else "")
        if document.url:
            url = urljoin(document.url, url)
        if url.lower().startswith(("http://", "https://")):
            out.append(url)
    return tuple(out)


def api_key_scheme(document: SpecDocument) -> tuple[str, ParamLocation] | None:
    """``(name, location)`` of the document's API-key scheme when it declares exactly one."""
    data = document.data
    components = data.get("components")
    if document.version == "2.0":
        schemes = data.get("securityDefinitions")
    else:
        schemes = components.get("securitySchemes") if isinstance(components, dict) else None
    found = [
        (s["name"], s["in"])
        for s in (schemes.values() if isinstance(schemes, dict) else [])
        if isinstance(s, dict)
        and s.get("type") == "apiKey"
        and isinstance(s.get("name"), str)
        and s.get("in") in ("header", "query", "cookie")
    ]
    return found[0] if len(found) == 1 else None
