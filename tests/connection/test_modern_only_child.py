"""``auto`` reaches a server that speaks only 2026-07-28, whatever it answers to ``initialize``.

The conformance suite's 2026 mock servers answer ``initialize`` with -32020, -32601, or a result
claiming 2026-07-28, not only -32022. Each is a real child: a :class:`~mcpmux.testing.MockServer`
that serves only the stateless era (``python -m mcpmux.testing``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import ProtocolChoice, Settings
from mcpmux.connection import Connection, ToolResult
from mcpmux.errors import ProtocolVersionMismatch, ServerError
from mcpmux.testing import MockServer
from mcpmux.testing.mock import InitializeAnswer
from tests.connection.servers import config, scripted

pytestmark = pytest.mark.anyio

SETTINGS = Settings(connect_timeout_ms=30_000, timeout_ms=30_000)
WAIT_S = 60


@asynccontextmanager
async def modern_only(answer: InitializeAnswer, protocol: ProtocolChoice = "auto") -> AsyncIterator[Connection]:
    """A connection to a child serving only 2026-07-28, answering ``initialize`` with ``answer``."""
    mock = MockServer("modern").tool("echo", result="stateless").era("2026-07-28", initialize_answer=answer)
    async with mock.serve("stdio", protocol=protocol) as served, Connection(served.config, SETTINGS) as conn:
        yield conn


@pytest.mark.subprocess
@pytest.mark.parametrize("answer", ["-32020", "-32601", "claim", "-32022"])
async def test_auto_follows_what_a_modern_only_server_answers_to_initialize(answer: InitializeAnswer) -> None:
    with anyio.fail_after(WAIT_S):
        async with modern_only(answer) as conn:
            version = conn.info.protocol_version
            tools = await conn.list_tools()
            result = await conn.call_tool("echo", {"text": "stateless"})
            await conn.ping()
    assert version == "2026-07-28"
    assert [tool.name for tool in tools] == ["echo"]
    assert ToolResult.of(result).text == "stateless"


@pytest.mark.subprocess
@pytest.mark.parametrize(("answer", "error"), [("claim", ProtocolVersionMismatch), ("-32601", ServerError)])
async def test_a_pinned_handshake_era_does_not_fall_back_to_discovery(
    answer: InitializeAnswer, error: type[Exception]
) -> None:
    with anyio.fail_after(WAIT_S), pytest.raises(error) as caught:
        async with modern_only(answer, protocol="2025-11-25"):
            pass
    assert "2026-07-28" in str(caught.value) or "initialize" in str(caught.value)


async def test_a_server_refusing_both_initialize_and_discover_is_a_mismatch_naming_both() -> None:
    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        if "id" not in message:
            return None
        error = {"code": types.METHOD_NOT_FOUND, "message": f"Method not found: {message['method']}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}

    conn = Connection(config(), Settings(), transport=lambda: scripted(answer))
    with anyio.fail_after(10), pytest.raises(ProtocolVersionMismatch) as caught:
        async with conn:
            pass
    assert "initialize" in caught.value.offered
    assert "server/discover" in caught.value.offered
