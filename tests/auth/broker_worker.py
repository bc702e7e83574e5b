"""One mcpmux process of the cross-process broker test: calls a tool for a while, reports what failed.

Run: ``python broker_worker.py MCP_URL SECONDS`` with the shared ``MCPMUX_DATA_DIR`` of the test; prints
one JSON line ``{"calls": N, "failures": [...], "refreshes": N}``.
"""

from __future__ import annotations

import json
import sys
import time

import anyio

from mcpmux.config.models import Config, Settings, StreamableHttpServerConfig
from mcpmux.errors import MCPMuxError
from mcpmux.manager import Manager

PAUSE_S = 0.05


async def main(url: str, seconds: float) -> None:
    server = StreamableHttpServerConfig(name="notes", url=url)
    settings = Settings(connect_timeout_ms=60_000, timeout_ms=60_000, retry_attempts=0)
    calls, failures = 0, []
    async with Manager(Config(servers=(server,), settings=settings), catalog=False, start=False) as mux:
        await mux.refresh("notes")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                await mux.call_tool("notes:read_note", {})
            except MCPMuxError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            calls += 1
            await anyio.sleep(PAUSE_S)
    print(json.dumps({"calls": calls, "failures": failures}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], float(sys.argv[2]))
