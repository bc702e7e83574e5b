"""Echo calls through ``Connection`` against the raw SDK and a hand-written JSON-RPC floor, same run.

Rows: 2,000 sequential and 2,000 calls 50 at a time, each against one fresh server process:
- ``sdk stdio``: the raw SDK (``ClientSession`` over ``stdio_client``), the baseline;
- ``connection stdio``: ``Connection`` over mcpmux's stdio transport, same server program;
- ``sdk / connection in-process``: both against the server in this process over memory streams:
  the connection layer's own cost, without a transport or a second process (ratio vs the SDK row);
- ``floor stdio``: plain asyncio newline JSON-RPC on both ends (what a pipe can do);
- ``connection tcp`` / ``websocket`` / ``http``: ``Connection`` over the other transports, the same
  SDK server behind mcpmux's server-side adapters or the SDK's Streamable HTTP app.

Run: ``.venv/bin/python bench/bench_connection.py [--calls N] [--concurrency C]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

from mcpmux.config.models import Settings, StdioServerConfig, TcpServerConfig
from mcpmux.connection import Connection

Call = Callable[[str], Awaitable[str]]

# One SDK low-level server for every MCP row; argv[1] picks how it is served.
ECHO_SERVER = r"""
import sys, anyio, mcp_types as types
from mcp.server import Server

async def list_tools(ctx, params):
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])

async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=params.arguments["text"])])

server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
mode = sys.argv[1]

async def stdio():
    from mcp.server.stdio import stdio_server
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())

async def tcp():
    from mcpmux.transports.tcp import serve_tcp
    await serve_tcp(server, "127.0.0.1", int(sys.argv[2]))

async def websocket():
    from mcpmux.transports.websocket import serve_websocket
    await serve_websocket(server, "127.0.0.1", int(sys.argv[2]))

if mode == "http":
    import uvicorn
    uvicorn.run(server.streamable_http_app(json_response=True), host="127.0.0.1", port=int(sys.argv[2]),
                log_level="warning")
else:
    anyio.run({"stdio": stdio, "tcp": tcp, "websocket": websocket}[mode])
"""

# The floor: a newline JSON-RPC echo with no MCP at all.
FLOOR_SERVER = r"""
import json, sys
for line in sys.stdin.buffer:
    msg = json.loads(line)
    content = [{"type": "text", "text": msg["params"]["text"]}]
    reply = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": content}}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


async def measure(call: Call, calls: int, concurrency: int) -> tuple[float, float, float]:
    """Calls per second sequential and ``concurrency`` at a time, and this process's CPU µs per
    sequential call (the client's own cost: steadier than wall time on a shared machine)."""
    for i in range(20):
        assert await call(f"warm {i}") == f"warm {i}"
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        await call(str(i))
    sequential = calls / (time.perf_counter() - started)
    cpu_us = (time.process_time() - cpu) / calls * 1e6

    async def worker(start: int) -> None:
        for i in range(start, calls, concurrency):
            await call(str(i))

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for start in range(concurrency):
            tg.start_soon(worker, start)
    return sequential, calls / (time.perf_counter() - started), cpu_us


def _text(result: Any) -> str:
    return str(result.content[0].text)


@asynccontextmanager
async def sdk_stdio() -> AsyncIterator[Call]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-c", ECHO_SERVER, "stdio"], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield lambda text: _sdk_echo(session, text)


async def _sdk_echo(session: Any, text: str) -> str:
    return _text(await session.call_tool("echo", {"text": text}, read_timeout_seconds=30))


@asynccontextmanager
async def through_connection(server: Any) -> AsyncIterator[Call]:
    async with Connection(server, Settings()) as conn:

        async def call(text: str) -> str:
            return _text(await conn.call_tool("echo", {"text": text}))

        yield call


def echo_server() -> Any:
    """The echo server of ``ECHO_SERVER``, in this process."""
    scope: dict[str, Any] = {}
    exec(ECHO_SERVER.split("mode = sys.argv[1]")[0], scope)  # the definitions only, not the serving
    return scope["server"]


@asynccontextmanager
async def in_process_streams() -> AsyncIterator[Any]:
    """Memory streams to the echo server served in this process (no transport, no second process)."""
    from mcp.shared.memory import create_client_server_memory_streams

    from mcpmux.transports.base import TransportStreams

    server = echo_server()
    async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tg:
        tg.start_soon(server.run, *served, server.create_initialization_options())
        yield TransportStreams(read=client[0], write=client[1], describe="in-process")
        tg.cancel_scope.cancel()


@asynccontextmanager
async def sdk_in_process() -> AsyncIterator[Call]:
    from mcp.client.session import ClientSession

    async with in_process_streams() as streams, ClientSession(streams.read, streams.write) as session:
        await session.initialize()
        yield lambda text: _sdk_echo(session, text)


@asynccontextmanager
async def connection_in_process() -> AsyncIterator[Call]:
    async with Connection(stdio_config(), Settings(), transport=in_process_streams) as conn:

        async def call(text: str) -> str:
            return _text(await conn.call_tool("echo", {"text": text}))

        yield call


def stdio_config() -> StdioServerConfig:
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return StdioServerConfig(name="echo", command=sys.executable, args=("-c", ECHO_SERVER, "stdio"), env=env)


@asynccontextmanager
async def floor_stdio() -> AsyncIterator[Call]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOR_SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, limit=2**24
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    waiting: dict[int, asyncio.Future[str]] = {}
    next_id = 0

    async def read_loop() -> None:
        while line := await stdout.readline():
            msg = json.loads(line)
            waiting.pop(msg["id"]).set_result(msg["result"]["content"][0]["text"])

    async def call(text: str) -> str:
        nonlocal next_id
        next_id += 1
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        waiting[next_id] = future
        request = {"jsonrpc": "2.0", "id": next_id, "method": "echo", "params": {"text": text}}
        stdin.write(json.dumps(request).encode() + b"\n")
        return await future

    reader = asyncio.create_task(read_loop())
    try:
        yield call
    finally:
        stdin.close()
        await asyncio.wait_for(proc.wait(), 5)
        await asyncio.wait_for(reader, 5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def served(mode: str) -> AsyncIterator[int]:
    """Run the echo server as a ``mode`` listener in a child process; yield its port once it accepts."""
    port = free_port()
    proc = await anyio.open_process([sys.executable, "-c", ECHO_SERVER, mode, str(port)], stdout=None, stderr=None)
    try:
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    if proc.returncode is not None:
                        raise RuntimeError(f"the {mode} echo server exited with {proc.returncode}") from None
                    await anyio.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        with anyio.fail_after(5):
            await proc.wait()


def network_config(mode: str, port: int) -> Any:
    from mcpmux.config.models import StreamableHttpServerConfig, WebSocketServerConfig

    if mode == "tcp":
        return TcpServerConfig(name="echo", url=f"tcp://127.0.0.1:{port}")
    if mode == "websocket":
        return WebSocketServerConfig(name="echo", url=f"ws://127.0.0.1:{port}/")
    return StreamableHttpServerConfig(name="echo", url=f"http://127.0.0.1:{port}/mcp")


async def run_all(calls: int, concurrency: int, rounds: int) -> list[list[Any]]:
    rss = psutil.Process()
    samples: dict[str, list[tuple[float, float, float, float]]] = {}

    async def sample(name: str, client: Any) -> None:
        before = rss.memory_info().rss
        async with client as call:
            sequential, concurrent, cpu_us = await measure(call, calls, concurrency)
        samples.setdefault(name, []).append((sequential, concurrent, cpu_us, (rss.memory_info().rss - before) / 2**20))

    # Interleaved rounds, medians reported: other work on a 2-core machine moves single runs by 30 %.
    for _ in range(rounds):
        await sample("sdk stdio (baseline)", sdk_stdio())
        await sample("connection stdio", through_connection(stdio_config()))
    # The layer's own cost: the same two clients against the server in this process.
    for _ in range(rounds):
        await sample("sdk in-process", sdk_in_process())
        await sample("connection in-process", connection_in_process())
    await sample("floor stdio (asyncio json-rpc)", floor_stdio())
    rows = [[name, *(_median(v[i] for v in got) for i in range(4))] for name, got in samples.items()]
    for mode in ("tcp", "websocket", "http"):
        try:
            async with served(mode) as port:
                await sample(f"connection {mode}", through_connection(network_config(mode, port)))
            rows.append([f"connection {mode}", *samples[f"connection {mode}"][0]])
        except Exception as exc:  # noqa: BLE001 -- a missing transport is a row, not a failed run
            rows.append([f"connection {mode}", f"n/a: {type(exc).__name__}: {exc}"[:80], "", "", ""])
    return rows


def _median(values: Any) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2])


def main() -> None:
    """Measure and report (``bench/results/connection.json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = asyncio.run(run_all(args.calls, args.concurrency, args.rounds))
    baseline = {"connection in-process": rows[2]}  # in-process rows compare with the SDK in-process
    table = [[*r[:3], *_ratios(r, *baseline.get(r[0], rows[0])[1:3]), *r[3:]] for r in rows]
    conc = f"{args.concurrency}-conc calls/s"
    columns = ["client", "seq calls/s", conc, "seq vs sdk", "conc vs sdk", "client cpu us/call", "rss +MiB"]
    report(
        "connection",
        columns,
        table,
        calls=args.calls,
        concurrency=args.concurrency,
        rss_mib=psutil.Process().memory_info().rss / 2**20,
    )


def _ratios(row: list[Any], base_seq: float, base_conc: float) -> list[Any]:
    if not isinstance(row[1], float):
        return ["", ""]
    return [row[1] / base_seq, row[2] / base_conc]


if __name__ == "__main__":
    main()
