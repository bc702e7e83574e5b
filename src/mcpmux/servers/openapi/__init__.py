"""OpenAPI sources: a REST service described by OpenAPI 3.0/3.1 or Swagger 2.0, served as MCP tools.

- :mod:`.document` reads a document from a file or URL, within bounds;
- :mod:`.schemas` follows local ``$ref`` pointers and inlines schemas (cycles and size bounded);
- :mod:`.convert` turns each operation into a tool and the recipe of its request;
- :mod:`.execute` sends that request with httpx (auth, no redirects, SSRF checks, size cap);
- :mod:`.server` makes the whole an in-process MCP server (``type: openapi`` in the config).
"""

from __future__ import annotations

from mcpmux.servers.openapi.convert import (
    MAX_OPERATIONS,
    BodyBinding,
    Operation,
    OperationFilter,
    ParamBinding,
    convert,
    document_base_url,
)
from mcpmux.servers.openapi.document import SpecDocument, fetch_spec, load_spec, parse_spec, read_spec_file
from mcpmux.servers.openapi.execute import HttpTarget, OpenAPIExecutor
from mcpmux.servers.openapi.server import build_openapi_server, open_openapi_source, operations_of, target_of

__all__ = [
    "MAX_OPERATIONS",
    "BodyBinding",
    "HttpTarget",
    "OpenAPIExecutor",
    "Operation",
    "OperationFilter",
    "ParamBinding",
    "SpecDocument",
    "build_openapi_server",
    "convert",
    "document_base_url",
    "fetch_spec",
    "load_spec",
    "open_openapi_source",
    "operations_of",
    "parse_spec",
    "read_spec_file",
    "target_of",
]
