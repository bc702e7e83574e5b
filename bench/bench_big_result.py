"""Peak memory of one big ``tools/call`` result over stdio: the raw SDK, mcpmux's SDK path, the lean path.

Each client runs in its own fresh process against the same SDK low-level server (a tool ``big``
returning ``size`` bytes of text). The client connects, warms up with a small result, reads its
resident set, makes the one big call, and reports the growth of its peak resident set
(``ru_maxrss`` after the call minus the resident set before it) as a multiple of the payload, with
the call's wall time. The resident set counts what ``tracemalloc`` cannot see (pydantic-core's
parse buffers).

Run: ``.venv/bin/python bench/bench_big_result.py [--mb 40] [--rounds 3]`` (writes
``results/big_result.json``; the median of the rounds, interleaved).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

SERVER = """
import anyio, mcp_types as types
from mcp.server import Server

async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"size": {"type": "integer"}}}
    return types.ListToolsResult(tools=[types.Tool(name="big", input_schema=schema)])

async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="x" * params.arguments["size"])])

async def main():
    from mcp.server.stdio import stdio_server
    server = Server("big", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

anyio.run(main)
"""
KINDS = ("sdk", "sdk-path", "lean")
LABELS = {
    "sdk": "raw SDK ClientSession (stdio_client)",
    "sdk-path": "mcpmux Connection, lean path off",
    "lean": "mcpmux Connection, lean path",
}
MB = 1 << 20


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def client(kind: str, server: str, size: int) -> None:
    """One client process: connect, warm up, measure the big call, print one JSON line."""
    import anyio

    async def main() -> None:
        if kind == "sdk":
            from mcp.client.session import ClientSession
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=sys.executable, args=[server])
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()

                async def call(n: int) -> str:
                    result = await session.call_tool("big", {"size": n})
                    return str(result.content[0].text)  # type: ignore[union-attr]

                await report_call(call)
            return
        if kind == "sdk-path":
            os.environ["MCPMUX_LEAN_PATH"] = "0"
        from mcpmux.config.models import Settings, StdioServerConfig
        from mcpmux.connection import Connection

        config = StdioServerConfig(name="big", command=sys.executable, args=(server,))
        settings = Settings(max_message_bytes=4 * size, timeout_ms=300_000)
        async with Connection(config, settings) as conn:
            assert getattr(conn, "lean_path", False) is (kind == "lean")  # absent before the lean path
            await conn.list_tools()

            async def call(n: int) -> str:
                result = await conn.call_tool("big", {"size": n})
                return str(result.content[0].text)  # type: ignore[union-attr]

            await report_call(call)

    async def report_call(call: Any) -> None:
        await call(1000)
        before = _rss()
        started = time.perf_counter()
        text = await call(size)
        wall = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        assert len(text) == size
        del text
        print(json.dumps({"peak_growth": peak - before, "seconds": wall}), flush=True)

    anyio.run(main)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=40.0, help="the result's size in MiB")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median reported)")
    parser.add_argument("--client", nargs=3, metavar=("KIND", "SERVER", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.client:
        client(args.client[0], args.client[1], int(args.client[2]))
        return
    size = int(args.mb * MB)
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        server = Path(tmp) / "big_server.py"
        server.write_text(SERVER)
        for _ in range(args.rounds):
            for kind in KINDS:
                out = subprocess.run(
                    [sys.executable, __file__, "--client", kind, str(server), str(size)],
                    capture_output=True, text=True, timeout=900, check=True,
                )  # fmt: skip
                runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rows = []
    for kind in KINDS:
        growth = statistics.median(r["peak_growth"] for r in runs[kind])
        seconds = statistics.median(r["seconds"] for r in runs[kind])
        rows.append([LABELS[kind], round(growth / MB, 1), f"{growth / size:.2f}x", round(seconds, 3)])
    columns = [f"one {args.mb:g} MiB result over stdio", "peak RSS growth MiB", "x payload", "call s (median)"]
    report("big_result", columns, rows, mb=args.mb, rounds=args.rounds)


if __name__ == "__main__":
    main()
