"""A server with state: ``bump`` counts the calls this process has answered (per-client isolation tests)."""

from __future__ import annotations

import os

import anyio

from mcpmux.testing import MockServer


def counter() -> MockServer:
    """``bump`` -> ``"<count> pid <pid>"``; ``python -m mcpmux.testing --module tests.daemon.counter:counter``."""
    state = {"count": 0}

    def bump() -> str:
        state["count"] += 1
        return f"{state['count']} pid {os.getpid()}"

    async def wait(marker: str, seconds: float) -> str:
        """Mark that the call arrived (a file), then answer after ``seconds``."""
        await anyio.Path(marker).write_text(str(os.getpid()), encoding="utf-8")
        await anyio.sleep(seconds)
        return "waited"

    def big(size: int) -> str:
        """``size`` bytes of text (a result larger than a pipe's or socket's buffer many times over)."""
        return "x" * size

    wait_schema = {"type": "object", "properties": {"marker": {"type": "string"}, "seconds": {"type": "number"}}}
    big_schema = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}
    server = MockServer("counter").tool("bump", bump).tool("wait", wait, schema=wait_schema)
    return server.tool("big", big, schema=big_schema)
