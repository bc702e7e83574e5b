"""A lean Streamable HTTP load generator: raw HTTP/1.1 on keep-alive sockets, no SDK.

A server benchmark wants a load generator that costs little next to the server (as ``wrk`` or
``h2load`` do): the SDK client spends 1.2-2.3 ms of CPU per call, more than the gateway itself,
and on a two-core machine that CPU is taken from the server being measured. This client frames
JSON-RPC by hand and reads either answer a Streamable HTTP server may give (one JSON body, or an
SSE stream, plain or chunked), so every server in a run is driven by the same cheap code.

It speaks the 2025-11-25 handshake era: ``initialize``, ``notifications/initialized``, then
``tools/call`` requests carrying the session id; concurrent calls each take a pooled connection.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

__all__ = ["raw_http"]

PROTOCOL_VERSION = "2025-11-25"


class _Conn:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def post(
        self, host: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        head = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split()[1])
        response_headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            response_headers[name.strip().lower()] = value.strip()
        if "content-length" in response_headers:
            return status, response_headers, await self.reader.readexactly(int(response_headers["content-length"]))
        if response_headers.get("transfer-encoding") == "chunked":
            return status, response_headers, await self._chunked()
        return status, response_headers, await self.reader.read()

    async def _chunked(self) -> bytes:
        parts = []
        while True:
            size = int((await self.reader.readline()).split(b";")[0], 16)
            if size == 0:
                await self.reader.readline()
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()


def _answer(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id`` in a JSON body or an SSE stream."""
    if content_type.startswith("application/json"):
        message: dict[str, Any] = json.loads(body)
        return message
    for line in body.splitlines():
        if line.startswith(b"data:") and line[5:].strip():
            message = json.loads(line[5:])
            if message.get("id") == request_id:
                return message
    raise RuntimeError(f"no response to request {request_id} in the stream: {body[:200]!r}")


@asynccontextmanager
async def raw_http(url: str, tool: str) -> AsyncIterator[Any]:
    """Yield ``call(text) -> str`` calling ``tool`` with ``{"text": text}`` at the Streamable HTTP ``url``."""
    parts = urlsplit(url)
    host, port, path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
    netloc = parts.netloc
    idle: list[_Conn] = []
    opened: list[_Conn] = []
    ids = itertools.count(1)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    async def connection() -> _Conn:
        if idle:
            return idle.pop()
        conn = _Conn(*await asyncio.open_connection(host, port))
        opened.append(conn)
        return conn

    async def rpc(message: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any] | None]:
        body = json.dumps(message).encode()
        conn = await connection()
        try:
            status, response_headers, answer = await conn.post(netloc, path, body, headers)
        except (ConnectionError, asyncio.IncompleteReadError):
            # An idle keep-alive connection the server has closed (uvicorn does after 5 s): reconnect once.
            conn.writer.close()
            conn = _Conn(*await asyncio.open_connection(host, port))
            opened.append(conn)
            status, response_headers, answer = await conn.post(netloc, path, body, headers)
        idle.append(conn)
        if status == 202:
            return response_headers, None
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {answer[:200]!r}")
        return response_headers, _answer(response_headers.get("content-type", ""), answer, message["id"])

    try:
        init = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "loadgen", "version": "1"},
        }
        opened_headers, _ = await rpc({"jsonrpc": "2.0", "id": next(ids), "method": "initialize", "params": init})
        headers |= {"mcp-session-id": opened_headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL_VERSION}
        await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})

        async def call(text: str) -> str:
            params = {"name": tool, "arguments": {"text": text}}
            _, answer = await rpc({"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params})
            assert answer is not None
            if "error" in answer:
                raise RuntimeError(f"tools/call failed: {answer['error']}")
            return str(answer["result"]["content"][0]["text"])

        yield call
    finally:
        for conn in opened:
            conn.writer.close()
