"""Echo calls through ``mcpmux serve`` against the same upstream called directly and behind fastmcp.

One echo server (the SDK's low-level ``Server`` over stdio) is the upstream of every row:
- ``direct stdio``: the raw SDK ``ClientSession`` straight to the upstream (the ceiling);
- ``gateway http``: the same client over Streamable HTTP to ``mcpmux serve --http`` (a subprocess);
- ``gateway tcp``: mcpmux's ``Connection`` over TCP to ``mcpmux serve --tcp`` (same process);
- ``gateway http --json-response``: as ``gateway http`` with one JSON body per POST (no SSE);
- ``fastmcp http``: the same HTTP clients to a fastmcp proxy (``create_proxy``) over the same upstream.

Each HTTP face is driven by two clients: the SDK's ``ClientSession`` (what a Python host would
use) and ``loadgen.raw_http``, a lean raw-HTTP client (what a server benchmark uses, so the
client's CPU does not crowd out the server's on a small machine). Every row is compared with
fastmcp driven by the same client.

fastmcp is never a dependency of mcpmux: the benchmark installs it into a throw-away venv under a
temporary directory (``pip install fastmcp``); if that fails the row says "not measured".

Rows run interleaved for ``--rounds`` rounds over clients that stay connected (the machine is
shared; the best round of each row counts).

Run: ``.venv/bin/python bench/bench_gateway.py [--calls N] [--rounds R] [--no-fastmcp | --fastmcp-python PY]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).parent))
from bench_connection import ECHO_SERVER, Call, free_port, measure, sdk_stdio
from harness import report
from loadgen import raw_http

from mcpmux.config.models import Settings, TcpServerConfig
from mcpmux.connection import Connection

MCPMUX = str(Path(sys.executable).with_name("mcpmux"))
START_TIMEOUT_S = 300.0  # an upper bound: under callgrind on a loaded 2-core machine start-up takes minutes
WARMUP_CALLS = 20

# On the loop and HTTP parser mcpmux serves on (uvloop, httptools): asyncio + h11 would flatter mcpmux ~10 %.
FASTMCP_PROXY = r"""
import functools, sys
import anyio
from fastmcp.server import create_proxy
config = {"mcpServers": {"echo": {"command": sys.argv[1], "args": ["-c", sys.argv[2], "stdio"]}}}
proxy = create_proxy(config)
serve = functools.partial(
    proxy.run_async, transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False,
    log_level="warning", uvicorn_config={"http": "httptools"},
)
anyio.run(serve, backend_options={"use_uvloop": True})
"""


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MCPMUX_"))}
    return env | {f"XDG_{k}_HOME": str(root / k.lower()) for k in ("CONFIG", "DATA", "CACHE", "STATE")}


@contextmanager
def mcpmux_serve(root: Path, *faces: str, prefix: Sequence[str] = ()) -> Iterator[tuple[dict[str, str], int]]:
    """``mcpmux serve FACES`` over the echo upstream (run under ``prefix``); yields ``({scheme: address}, pid)``."""
    upstream = {"name": "echo", "type": "stdio", "command": sys.executable, "args": ["-c", ECHO_SERVER, "stdio"]}
    root.mkdir(parents=True, exist_ok=True)
    config = root / "mcpmux.json"
    config.write_text(json.dumps({"mcp": {"servers": [upstream], "security": {"pinning": "off"}}}))
    log = root / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*prefix, MCPMUX, "--config", str(config), "serve", *faces], env=_env(root), stderr=sink,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(found := re.findall(r"serving ((\w+)://[^\s/]+)", log.read_text())) < len(faces) // 2:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"mcpmux serve did not start: {log.read_text()}")
            time.sleep(0.05)
        yield {scheme: address for address, scheme in found}, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


@asynccontextmanager
async def sdk_http(url: str, tool: str | None = None) -> AsyncIterator[Call]:
    """The raw SDK ``ClientSession`` over Streamable HTTP, calling ``tool`` (or the one ending in echo)."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        name = tool or next(t.name for t in (await session.list_tools()).tools if t.name.endswith("echo"))

        async def call(text: str) -> str:
            result = await session.call_tool(name, {"text": text}, read_timeout_seconds=30)
            return str(result.content[0].text)  # type: ignore[union-attr]

        yield call


@asynccontextmanager
async def connection_tcp(url: str) -> AsyncIterator[Call]:
    async with Connection(TcpServerConfig(name="gateway", url=url), Settings()) as conn:

        async def call(text: str) -> str:
            result = await conn.call_tool("echo__echo", {"text": text})
            return str(result.content[0].text)  # type: ignore[union-attr]

        yield call


def install_fastmcp(root: Path) -> Path | None:
    """A venv under ``root`` with fastmcp from PyPI, or ``None`` if it does not install cleanly."""
    venv = root / "fastmcp-venv"
    python = venv / "bin" / "python"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "fastmcp", "uvloop", "httptools"], check=True,
                       capture_output=True, timeout=600)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"fastmcp did not install: {exc}", file=sys.stderr)
        return None
    return python


@contextmanager
def fastmcp_proxy(python: Path, prefix: Sequence[str] = ()) -> Iterator[tuple[str, int]]:
    port = free_port()
    proc = subprocess.Popen([*prefix, str(python), "-c", FASTMCP_PROXY, sys.executable, ECHO_SERVER, str(port)],
                            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


async def wait_http(url: str) -> None:
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    with anyio.fail_after(START_TIMEOUT_S):
        while True:
            try:
                await (await anyio.connect_tcp(host, int(port))).aclose()
                return
            except OSError:
                await anyio.sleep(0.1)


async def measured(call: Call, args: argparse.Namespace, proxy_pid: int | None) -> list[Any]:
    """``measure`` plus the CPU the proxy process (not its upstream child) spent per call."""
    proxy = psutil.Process(proxy_pid) if proxy_pid is not None else None
    before = sum(proxy.cpu_times()[:2]) if proxy is not None else 0.0
    row = list(await measure(call, args.calls, args.concurrency))
    spent = sum(proxy.cpu_times()[:2]) - before if proxy is not None else None
    calls = 2 * args.calls + WARMUP_CALLS
    return [*row, spent / calls * 1e6 if spent is not None else "-"]


FASTMCP_SDK = "fastmcp http (SDK client)"
FASTMCP_LEAN = "fastmcp http (lean client)"


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        faces, pid = stack.enter_context(mcpmux_serve(root / "a", "--http", "127.0.0.1:0", "--tcp", "127.0.0.1:0"))
        json_faces, json_pid = stack.enter_context(mcpmux_serve(root / "b", "--http", "127.0.0.1:0", "--json-response"))
        gateway_url, json_url = faces["http"] + "/mcp", json_faces["http"] + "/mcp"
        # name: (client, proxy pid, the fastmcp row it is compared with)
        rows: dict[str, tuple[Callable[[], Any], int | None, str]] = {
            "direct stdio (SDK)": (sdk_stdio, None, FASTMCP_SDK),
            "gateway http (SDK client)": (lambda: sdk_http(gateway_url, "echo__echo"), pid, FASTMCP_SDK),
            "gateway tcp (mcpmux Connection)": (lambda: connection_tcp(faces["tcp"]), pid, FASTMCP_SDK),
            "gateway http --json-response": (lambda: sdk_http(json_url, "echo__echo"), json_pid, FASTMCP_SDK),
            "gateway http (lean client)": (lambda: raw_http(gateway_url, "echo__echo"), pid, FASTMCP_LEAN),
        }
        python = None if args.no_fastmcp else (args.fastmcp_python or install_fastmcp(root))
        if python is not None:
            url, fast_pid = stack.enter_context(fastmcp_proxy(python))
            await wait_http(url)
            rows[FASTMCP_SDK] = (lambda: sdk_http(url), fast_pid, FASTMCP_SDK)
            rows[FASTMCP_LEAN] = (lambda: raw_http(url, "echo"), fast_pid, FASTMCP_LEAN)
        # Every client stays connected for the whole run and the rows take turns, round after
        # round, so a row and its baseline see the same machine (this one's speed drifts by ±30 %).
        best: dict[str, list[Any]] = {}
        async with AsyncExitStack() as clients:
            calls = {name: await clients.enter_async_context(connect()) for name, (connect, _, _) in rows.items()}
            for _round in range(args.rounds):
                for name, (_, proxy_pid, _) in rows.items():
                    best[name] = _best(best.get(name), await measured(calls[name], args, proxy_pid))
    _report(best, {name: baseline for name, (_, _, baseline) in rows.items()}, args)


def _best(old: list[Any] | None, new: list[Any]) -> list[Any]:
    """Per column the best of two rounds: the most calls/s, the least CPU."""
    if old is None:
        return new
    return [max(old[0], new[0]), max(old[1], new[1]), *(_least(a, b) for a, b in zip(old[2:], new[2:], strict=True))]


def _least(a: Any, b: Any) -> Any:
    return min(a, b) if isinstance(a, float) and isinstance(b, float) else a


def _report(best: dict[str, list[Any]], baselines: dict[str, str], args: argparse.Namespace) -> None:
    direct = best["direct stdio (SDK)"]
    table = []
    for name, (seq, conc, cpu, proxy_cpu) in best.items():
        fast = best.get(baselines[name])
        vs_fast = f"{seq / fast[0]:.2f}x / {conc / fast[1]:.2f}x" if fast else "fastmcp not measured"
        if fast and isinstance(proxy_cpu, float) and isinstance(fast[3], float):
            vs_fast += f" / cpu {fast[3] / proxy_cpu:.2f}x"
        table.append([name, seq, conc, cpu, proxy_cpu, f"{seq / direct[0]:.2f}x / {conc / direct[1]:.2f}x", vs_fast])
    if FASTMCP_SDK not in best:
        table.append([FASTMCP_SDK, "not measured", "not measured", "-", "-", "-", "-"])
    columns = [
        "path", "calls/s seq", f"calls/s x{args.concurrency}", "client CPU us/call", "proxy CPU us/call",
        "vs direct (seq / conc)", "vs fastmcp, same client (seq / conc / proxy cpu)",
    ]  # fmt: skip
    report("gateway", columns, table, calls=args.calls, concurrency=args.concurrency)


def main() -> None:
    """Parse the options and run every row in one process, one after the other."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls per row and round, sequential and concurrent")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6, help="rows interleaved; the best round of each is kept")
    parser.add_argument("--no-fastmcp", action="store_true", help="skip installing and measuring fastmcp")
    parser.add_argument("--fastmcp-python", type=Path, help="a python that has fastmcp (skips the install)")
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
