"""The console must not slow the gateway: ``/mcp`` calls/s with the console open and streaming vs without.

One ``mcpmux serve --http`` (a subprocess) fronts server-everything on stdio. The SDK client calls
``everything__echo`` sequentially over Streamable HTTP. "console open" adds what a browser with the
console open does meanwhile (in a process of its own): a signed-in ``GET /ui/events`` stream held
open (the live updates), the page re-fetches a live page makes (``/ui/servers`` and ``/ui/audit``,
every ``--refresh-s``), and with ``--restart-every-s`` a restart of a second server through the
console so state events keep streaming. That server is the built-in ``workspace`` (in-process) by
default: the events are the console's to carry, while restarting ``--restart-server time`` (a stdio
child) also spawns a Python process, CPU a 2-core machine feels that is not the console's. The two
rows alternate for ``--rounds`` paired rounds; the ratio is the median of the paired rounds' ratios
(target >= 0.95x). Beside calls/s: the gateway process's own CPU per call (what the console adds to
the gateway shows there whatever the machine's load) and the 99th percentile of a call's latency.
Run: ``.venv/bin/python bench/bench_console.py [--calls N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import psutil
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness import report

from tests.gateway.serving import serve
from tests.peers.fixtures import stdio_command


async def _calls(session: ClientSession, calls: int) -> tuple[float, float]:
    """Calls/s and the 99th percentile of one call's milliseconds (a stalled event loop shows there)."""
    await session.call_tool("everything__echo", {"message": "warm"})
    took: list[float] = []
    started = time.perf_counter()
    for i in range(calls):
        before = time.perf_counter()
        await session.call_tool("everything__echo", {"message": f"m{i}"})
        took.append(time.perf_counter() - before)
    took.sort()
    return calls / (time.perf_counter() - started), took[int(len(took) * 0.99) - 1] * 1000


async def _browser(base: str, key: str, refresh_s: float, restart_every_s: float, restarted: str) -> None:
    """What an open console does: the event stream, page re-fetches, and restarts that make events.

    Runs in its own process (``--as-browser``, stopped by SIGTERM), as a browser would, so its work
    does not share the measuring client's event loop; it prints the count of events it has seen.
    """
    seen = [0]
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        await client.post("/ui/login", data={"secret": key}, headers={"Origin": base})
        page = (await client.get(f"/ui/servers/{restarted}")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None, "not signed in"

        async def stream() -> None:
            async with client.stream("GET", "/ui/events") as events:
                async for line in events.aiter_lines():
                    if line.startswith("event:"):
                        seen[0] += 1
                        print(seen[0], flush=True)  # the parent reads the last count when it stops us
                        await client.get("/ui/servers")  # what static/app.js does on an event

        async def refetch() -> None:
            while True:
                await client.get("/ui/servers")
                await client.get("/ui/audit")
                await anyio.sleep(refresh_s)

        async def restart() -> None:
            while True:
                await anyio.sleep(restart_every_s)
                await client.post(
                    f"/ui/servers/{restarted}/restart", data={"csrf": csrf.group(1)}, headers={"Origin": base}
                )

        print("ready", flush=True)
        async with anyio.create_task_group() as tg:
            for job in (stream, refetch, *((restart,) if restart_every_s > 0 else ())):
                tg.start_soon(job)


class _Browser:
    """The browser process: started once, paused (SIGSTOP: no CPU, its stream idle) for the plain rounds."""

    def __init__(self, base: str, key: str, refresh_s: float, restart_every_s: float, restarted: str) -> None:
        argv = [sys.executable, __file__, "--as-browser", base, key, "--refresh-s", str(refresh_s),
                "--restart-every-s", str(restart_every_s), "--restart-server", restarted]  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        assert self.process.stdout is not None
        first = self.process.stdout.readline().strip()
        assert first == "ready", f"the browser process did not sign in: {first!r}"
        self.process.send_signal(signal.SIGSTOP)

    @contextmanager
    def running(self) -> Iterator[None]:
        self.process.send_signal(signal.SIGCONT)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGSTOP)

    def stop(self) -> int:
        """Stop it; the number of events it saw."""
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        out, _ = self.process.communicate(timeout=30)
        counts = [line for line in out.split() if line.isdigit()]
        return int(counts[-1]) if counts else 0


class _GatewayCpu:
    """CPU seconds the gateway process itself spent (its children, the servers, excluded)."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)

    def __call__(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system


async def _round(session: ClientSession, calls: int, cpu: _GatewayCpu) -> tuple[float, float, float]:
    """Calls/s, the gateway's CPU milliseconds per call (what the console adds shows here, load or not), p99 ms."""
    before = cpu()
    rate, p99 = await _calls(session, calls)
    return rate, (cpu() - before) * 1000 / (calls + 1), p99


async def _measure(
    url: str,
    base: str,
    key: str,
    calls: int,
    rounds: int,
    refresh_s: float,
    restart_every_s: float,
    pid: int,
    restarted: str,
) -> tuple[list[tuple[float, float, float]], list[tuple[float, float, float]], int]:
    plain, opened = [], []
    cpu = _GatewayCpu(pid)
    browser = _Browser(base, key, refresh_s, restart_every_s, restarted)
    async with (
        httpx2.AsyncClient(timeout=60) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for _ in range(rounds):
            plain.append(await _round(session, calls, cpu))
            with browser.running():
                opened.append(await _round(session, calls, cpu))
    return plain, opened, browser.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--refresh-s", type=float, default=2.0, help="a person opening another page this often")
    parser.add_argument(
        "--restart-every-s", type=float, default=10.0,
        help="also restart a second server through the console this often (0: never); it spawns a process",
    )  # fmt: skip
    parser.add_argument(
        "--restart-server", choices=("workspace", "time"), default="workspace",
        help="the server restarted: workspace (in-process) or time (a stdio child: a process spawned each time)",
    )  # fmt: skip
    parser.add_argument("--as-browser", nargs=2, metavar=("BASE", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv if argv is not None else [])
    if args.as_browser:
        anyio.run(_browser, *args.as_browser, args.refresh_s, args.restart_every_s, args.restart_server)
        return
    with tempfile.TemporaryDirectory(prefix="mcpmux-bench-console-") as tmp:
        root = Path(tmp)
        entries = []
        for name in ("everything", "time"):
            command, cmd_args = stdio_command(name)
            entries.append({"name": name, "type": "stdio", "command": command, "args": cmd_args})
        entries.append({"name": "workspace", "type": "builtin", "root": str(root)})
        config = root / "mcpmux.json"
        config.write_text(json.dumps({"mcp": {"servers": entries, "security": {"pinning": "off"}}}))
        with serve(root, config, "--http", "127.0.0.1:0") as serving:
            key = re.search(r"console key (\S+)", serving.log())
            assert key is not None, serving.log()
            plain, opened, events = anyio.run(
                _measure, serving.url, serving.base, key.group(1), args.calls, args.rounds, args.refresh_s,
                args.restart_every_s, serving.process.pid, args.restart_server,
            )  # fmt: skip
    # Rounds alternate; the median of each round's ratio is robust to a neighbour's burst on a shared machine.
    ratios = sorted(o[0] / p[0] for o, p in zip(opened, plain, strict=True))
    ratio = ratios[len(ratios) // 2]
    cpu_plain = sorted(p[1] for p in plain)[len(plain) // 2]
    cpu_opened = sorted(o[1] for o in opened)[len(opened) // 2]
    p99_plain = sorted(p[2] for p in plain)[len(plain) // 2]
    p99_opened = sorted(o[2] for o in opened)[len(opened) // 2]
    rows = [
        ["/mcp, no console open", f"{max(p[0] for p in plain):.0f}", "1.00x", f"{cpu_plain:.2f}", f"{p99_plain:.1f}"],
        [
            "/mcp, console open + live updates",
            f"{max(o[0] for o in opened):.0f}",
            f"{ratio:.3f}x (median of {len(ratios)} paired rounds)",
            f"{cpu_opened:.2f} (+{cpu_opened - cpu_plain:.2f})",
            f"{p99_opened:.1f}",
        ],
    ]
    report(
        "console", ["path", "best calls/s", "ratio", "gateway CPU ms/call", "p99 ms/call"], rows, calls=args.calls,
        rounds=args.rounds, refresh_s=args.refresh_s, restart_every_s=args.restart_every_s, events_streamed=events,
        restart_server=args.restart_server,
        ratio=ratio, gateway_cpu_ms_per_call={"plain": cpu_plain, "opened": cpu_opened},
        p99_ms={"plain": p99_plain, "opened": p99_opened},
        plain=[p[0] for p in plain], opened=[o[0] for o in opened],
    )  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
