"""Sources and the REST API: what the REST path and an OpenAPI source cost.

- ``api execute`` vs ``mcp call``: one ``mcpmux serve --http`` (a subprocess) serving ``/api`` and
  ``/mcp`` over the same upstream (PyPI ``mcp-server-time`` on stdio, from tests/peers); sequential
  calls of ``time:get_current_time``, REST with an httpx client, MCP with the SDK's ``Client``.
- ``openapi tool`` vs ``raw httpx``: ``GET /get`` of a local httpbin (tests/peers/.venv-rest) called as
  a tool of an OpenAPI source through the manager, and with a bare httpx client.

Rows run interleaved for ``--rounds`` rounds; the best round counts (a shared machine).
Run: ``.venv/bin/python bench/bench_sources.py [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import report

from mcpmux import Manager
from mcpmux.config.models import OpenAPIServerConfig
from tests.gateway.serving import serve
from tests.peers.fixtures import run_httpbin, stdio_command

Call = Callable[[], Awaitable[object]]


async def _rate(call: Call, calls: int) -> float:
    await call()  # warm
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return calls / (time.perf_counter() - started)


async def _api_vs_mcp(base: str, mcp_url: str, calls: int, rounds: int) -> tuple[float, float]:
    from mcp import Client

    best_api = best_mcp = 0.0
    body = {"tool_id": "time:get_current_time", "arguments": {"timezone": "UTC"}}
    async with httpx.AsyncClient(base_url=base, timeout=60) as rest, Client(mcp_url, mode="legacy") as client:

        async def api_call() -> object:
            answer = await rest.post("/api/tools/execute", json=body)
            answer.raise_for_status()
            return answer

        async def mcp_call() -> object:
            return await client.call_tool("time__get_current_time", {"timezone": "UTC"})

        for _ in range(rounds):
            best_api = max(best_api, await _rate(api_call, calls))
            best_mcp = max(best_mcp, await _rate(mcp_call, calls))
    return best_api, best_mcp


async def _openapi_vs_httpx(httpbin: str, calls: int, rounds: int) -> tuple[float, float]:
    source = OpenAPIServerConfig(
        name="hb", spec=f"{httpbin}/spec.json", base_url=httpbin, include_operations=["get_get"]
    )
    best_tool = best_raw = 0.0
    async with Manager([source], catalog=False) as manager, httpx.AsyncClient(timeout=60) as raw:

        async def tool_call() -> object:
            return await manager.call_tool("hb:get_get", {})

        async def raw_call() -> object:
            answer = await raw.get(f"{httpbin}/get")
            return answer.json()

        for _ in range(rounds):
            best_tool = max(best_tool, await _rate(tool_call, calls))
            best_raw = max(best_raw, await _rate(raw_call, calls))
    return best_tool, best_raw


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory(prefix="mcpmux-bench-sources-") as tmp:
        root = Path(tmp)
        command, cmd_args = stdio_command("time")
        config = root / "mcpmux.json"
        entry = {"name": "time", "type": "stdio", "command": command, "args": cmd_args}
        config.write_text(json.dumps({"mcp": {"servers": [entry], "security": {"pinning": "off"}}}))
        with serve(root, config, "--http", "127.0.0.1:0") as serving:
            api, mcp = anyio.run(_api_vs_mcp, serving.base, serving.url, args.calls, args.rounds)
    with run_httpbin() as httpbin:
        tool, raw = anyio.run(_openapi_vs_httpx, httpbin, args.calls, args.rounds)
    rows = [
        ["POST /api/tools/execute (httpx)", f"{api:.0f}", f"{api / mcp:.2f}x of /mcp"],
        ["/mcp tools/call (SDK Client)", f"{mcp:.0f}", "1.00x"],
        ["OpenAPI tool via Manager", f"{tool:.0f}", f"{tool / raw:.2f}x of raw httpx"],
        ["raw httpx GET", f"{raw:.0f}", "1.00x"],
    ]
    report("sources", ["path", "calls/s", "ratio"], rows, calls=args.calls, rounds=args.rounds)


if __name__ == "__main__":
    main(sys.argv[1:])
