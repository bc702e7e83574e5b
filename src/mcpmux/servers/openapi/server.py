"""An OpenAPI source as an MCP server: its operations as tools, calls as HTTP requests.

:func:`open_openapi_source` reads the document, converts it and yields a low-level SDK ``Server``
that the in-process transport runs, so the manager, the guard, the gateway and the chat see an
OpenAPI source exactly as they see any MCP server (names, pins, approval, audit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent

from mcpmux.config.models import OpenAPIServerConfig
from mcpmux.errors import SpecError
from mcpmux.servers.openapi.convert import Operation, OperationFilter, api_key_scheme, convert, document_base_url
from mcpmux.servers.openapi.document import SpecDocument, load_spec
from mcpmux.servers.openapi.execute import HttpTarget, OpenAPIExecutor, origin_of

__all__ = ["build_openapi_server", "open_openapi_source", "operations_of", "target_of"]

SERVER_VERSION = "0.1.0"
_CONNECT_TIMEOUT_S = 10.0


def operations_of(config: OpenAPIServerConfig, document: SpecDocument) -> list[Operation]:
    """The operations of ``document`` that ``config`` selects, as tools.

    Raises:
        SpecError: as :func:`~mcpmux.servers.openapi.convert.convert`.
    """
    selection = OperationFilter(
        include_tags=config.include_tags,
        exclude_tags=config.exclude_tags,
        include_operations=config.include_operations,
        exclude_operations=config.exclude_operations,
    )
    return convert(document, selection, auth_headers=_auth_headers(config, document))


def target_of(config: OpenAPIServerConfig, document: SpecDocument) -> HttpTarget:
    """Where ``config``'s requests go (its ``base_url``, else the document's server).

    Raises:
        SpecError: neither names an http(s) URL.
    """
    base = config.base_url or document_base_url(document)
    if base is None:
        raise SpecError(document.source, "servers", "names no server URL: set base_url on the source")
    headers = {k: v.get_secret_value() for k, v in config.headers.items()}
    return HttpTarget(
        base_url=base,
        explicit=config.base_url is not None,
        allow_private=config.allow_private_network,
        trusted_origin=origin_of(document.url) if document.url else None,
        auth=config.auth,
        api_key=api_key_scheme(document),
        headers=headers,
    )


def build_openapi_server(name: str, title: str, operations: list[Operation], executor: OpenAPIExecutor) -> Server[Any]:
    """A low-level SDK server listing ``operations`` as tools and calling them through ``executor``."""
    by_name = {operation.name: operation for operation in operations}
    tools = [operation.to_tool() for operation in operations]

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        operation = by_name.get(params.name)
        if operation is None:
            return CallToolResult(content=[TextContent(text=f"no operation {params.name!r}")], is_error=True)
        return await executor.call(operation, dict(params.arguments or {}))

    instructions = f"Operations of the REST API {title!r} as tools; each call is one HTTP request."
    return Server(
        name, version=SERVER_VERSION, instructions=instructions, on_list_tools=list_tools, on_call_tool=call_tool
    )


@asynccontextmanager
async def open_openapi_source(config: OpenAPIServerConfig, timeout_s: float) -> AsyncIterator[Server[Any]]:
    """Load ``config``'s document and yield its server; the HTTP client lives as long as the context.

    Raises:
        SpecError: the document cannot be read or converted, or names no server URL.
    """
    headers = {k: v.get_secret_value() for k, v in config.headers.items()}
    document = await load_spec(config.spec, headers=headers, verify_tls=config.verify_tls)
    operations = operations_of(config, document)
    target = target_of(config, document)
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, _CONNECT_TIMEOUT_S))
    async with httpx.AsyncClient(verify=config.verify_tls, timeout=timeout, follow_redirects=False) as client:
        executor = OpenAPIExecutor(config.name, target, client, config.max_response_bytes)
        yield build_openapi_server(config.name, document.title or config.name, operations, executor)


def _auth_headers(config: OpenAPIServerConfig, document: SpecDocument) -> frozenset[str]:
    auth = config.auth
    names = {name.lower() for name in config.headers}
    if auth is None:
        return frozenset(names)
    if auth.type in ("bearer", "basic"):
        names.add("authorization")
    elif auth.type == "api_key":
        scheme = api_key_scheme(document)
        location = auth.location or (scheme[1] if scheme else "header")
        name = auth.name or (scheme[0] if scheme else "X-API-Key")
        if location == "header":
            names.add(name.lower())
    return frozenset(names)
