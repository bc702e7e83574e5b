"""One client of the issue-24 table, in its own process: ``python _table_client.py KIND CALLS MODE ECHO PYTHON [N]``.

KIND: ``sdk`` (raw ``ClientSession``), ``connection``, ``manager``, ``guard`` (mcpmux; with the
suffix ``-sdk-path``, the same with the lean path off: ``MCPMUX_LEAN_PATH=0``), ``fastmcp``
(``fastmcp.Client``; run it with a python that has fastmcp), ``floor`` (plain asyncio newline
JSON-RPC). Every kind calls the same stdio echo server (the SDK low-level server in the file
ECHO, run by PYTHON). MODE ``time``: CALLS sequential calls after a warm-up; prints one JSON line
``{"calls_per_s": ..., "cpu_us": ...}``. MODE ``count`` (under callgrind): after the warm-up it
prints ``ready`` and waits for a line on stdin, makes CALLS calls, prints ``done`` and waits for
a line again, so the parent switches instrumentation on and off around the calls alone. N: calls
in flight at once (waves of N concurrent calls; 1, the default, is sequential).

Imports only what its KIND needs: the fastmcp kind runs in a python without mcpmux.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

WARMUP_CALLS = 30
SDK_PATH = "-sdk-path"
Call = Callable[[str], Awaitable[str]]


def _text(result: Any) -> str:
    return str(result.content[0].text)


@asynccontextmanager
async def sdk(argv: list[str]) -> AsyncIterator[Call]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call(text: str) -> str:
            return _text(await session.call_tool("echo", {"text": text}))

        yield call


def _config(argv: list[str]) -> Any:
    from mcpmux.config.models import Config, Settings, StdioServerConfig

    server = StdioServerConfig(name="echo", command=argv[0], args=tuple(argv[1:]))
    return Config(servers=(server,), settings=Settings(connect_timeout_ms=120_000, timeout_ms=120_000))


@asynccontextmanager
async def connection(argv: list[str]) -> AsyncIterator[Call]:
    from mcpmux.connection import Connection

    config = _config(argv)
    async with Connection(config.servers[0], config.settings) as conn:

        async def call(text: str) -> str:
            return _text(await conn.call_tool("echo", {"text": text}))

        yield call


@asynccontextmanager
async def manager(argv: list[str]) -> AsyncIterator[Call]:
    from mcpmux.manager import Manager

    async with Manager(_config(argv), catalog=False) as mux:

        async def call(text: str) -> str:
            return _text(await mux.call_tool("echo:echo", {"text": text}))

        yield call


@asynccontextmanager
async def guard(argv: list[str]) -> AsyncIterator[Call]:
    from mcpmux.manager import Manager
    from mcpmux.policy import Guard, StateStore

    with tempfile.TemporaryDirectory() as scratch:
        async with Manager(_config(argv), catalog=False) as mux:
            with StateStore(Path(scratch) / "state.db") as store:
                guarded = Guard(mux, store=store)

                async def call(text: str) -> str:
                    return _text(await guarded.call_tool("echo:echo", {"text": text}))

                yield call


@asynccontextmanager
async def fastmcp(argv: list[str]) -> AsyncIterator[Call]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    async with Client(StdioTransport(command=argv[0], args=argv[1:])) as client:

        async def call(text: str) -> str:
            return _text(await client.call_tool("echo", {"text": text}))

        yield call


@asynccontextmanager
async def floor(argv: list[str]) -> AsyncIterator[Call]:
    """The same MCP server, spoken to in newline JSON-RPC with no framework: the floor of a client."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=-1, stdout=-1, limit=2**24)
    assert proc.stdin is not None
    assert proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    waiting: dict[int, asyncio.Future[Any]] = {}
    ids = iter(range(1, 1 << 62))

    async def read_loop() -> None:
        while line := await stdout.readline():
            message = json.loads(line)
            if "id" in message and message["id"] in waiting:
                waiting.pop(message["id"]).set_result(message.get("result"))

    async def request(method: str, params: dict[str, Any]) -> Any:
        ident = next(ids)
        waiting[ident] = asyncio.get_running_loop().create_future()
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params}).encode() + b"\n")
        return await waiting[ident]

    reader = asyncio.ensure_future(read_loop())
    info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "1"}}
    await request("initialize", info)
    stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    async def call(text: str) -> str:
        result = await request("tools/call", {"name": "echo", "arguments": {"text": text}})
        return str(result["content"][0]["text"])

    try:
        yield call
    finally:
        stdin.close()
        await proc.wait()
        reader.cancel()


CLIENTS = {"sdk": sdk, "connection": connection, "manager": manager, "guard": guard, "fastmcp": fastmcp, "floor": floor}


async def _calls(call: Call, calls: int, concurrency: int) -> None:
    """``calls`` calls, ``concurrency`` at a time (waves of that many in flight together)."""
    if concurrency <= 1:
        for i in range(calls):
            await call(str(i))
        return
    import anyio

    async def one(i: int) -> None:
        assert await call(str(i)) == str(i)

    for wave in range(0, calls, concurrency):
        async with anyio.create_task_group() as tg:
            for i in range(wave, min(calls, wave + concurrency)):
                tg.start_soon(one, i)


async def run(kind: str, calls: int, mode: str, argv: list[str], concurrency: int = 1) -> None:
    async with CLIENTS[kind](argv) as call:
        for i in range(WARMUP_CALLS):
            assert await call(f"warm {i}") == f"warm {i}"
        await _calls(call, concurrency, concurrency)
        if mode == "count":
            print("ready", flush=True)
            sys.stdin.readline()
        started, cpu = time.perf_counter(), time.process_time()
        await _calls(call, calls, concurrency)
        wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
        if mode == "count":
            print("done", flush=True)
            sys.stdin.readline()
        else:
            print(json.dumps({"calls_per_s": calls / wall, "cpu_us": cpu_s / calls * 1e6}), flush=True)


def main() -> None:
    kind, calls, mode, echo, python = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    if kind.endswith(SDK_PATH):  # the same mcpmux client with the lean path off: the SDK's path
        kind = kind.removesuffix(SDK_PATH)
        os.environ["MCPMUX_LEAN_PATH"] = "0"
    concurrency = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    import anyio

    anyio.run(run, kind, calls, mode, [python, echo, "stdio"], concurrency)


if __name__ == "__main__":
    main()
