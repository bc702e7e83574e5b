"""The transport of a ``type: openapi`` server: its generated MCP server, run in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcpmux.config.models import OpenAPIServerConfig, Settings
from mcpmux.servers.openapi import open_openapi_source
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.inprocess import open_mcp_server

__all__ = ["open_openapi"]


@asynccontextmanager
async def open_openapi(server: OpenAPIServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Read ``server``'s document and yield the client side of its in-process MCP server.

    Raises (on entering):
        SpecError: the document cannot be read or converted, or names no server URL.
    """
    describe = f"in-process OpenAPI source ({server.spec})"
    async with (
        open_openapi_source(server, server.effective_timeout_s(settings)) as built,
        open_mcp_server(built, name=server.name, describe=describe) as streams,
    ):
        yield streams
