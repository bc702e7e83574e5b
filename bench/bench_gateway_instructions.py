"""Instructions per proxied call: ``mcpmux serve --http`` against a fastmcp proxy, counted by callgrind.

Wall-clock rates on a small shared machine swing by ±30 % between runs (bench_gateway.py keeps
the best of interleaved rounds); instruction counts do not (±1 % here). Each proxy runs under
``valgrind --tool=callgrind`` with instrumentation off until the lean client (``loadgen``) has
warmed it up, then counts the instructions of ``--calls`` sequential echo calls over the same
stdio upstream. Only the proxy process is counted (not its upstream child, not the client); a
system call's kernel time is not an instruction of the process, so this complements CPU time.

Needs ``valgrind`` (Debian package) and fastmcp (installed into a throw-away venv as in
bench_gateway.py); a missing one makes its row "not measured".

Run: ``.venv/bin/python bench/bench_gateway_instructions.py [--calls N] [--fastmcp-python PY]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from bench_gateway import fastmcp_proxy, install_fastmcp, mcpmux_serve, wait_http
from harness import report
from loadgen import raw_http

WARMUP_CALLS = 50


def _callgrind(out: Path) -> list[str]:
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]


def _control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], capture_output=True, check=True, timeout=60)


async def _count(url: str, tool: str, pid: int, out: Path, calls: int) -> float:
    """Instructions per call of the proxy ``pid`` while ``calls`` echo calls go through it."""
    await wait_http(url)
    async with raw_http(url, tool) as call:
        for i in range(WARMUP_CALLS):
            await call(f"warm {i}")
        _control(pid, "-i", "on")
        for i in range(calls):
            await call(str(i))
        _control(pid, "-i", "off")
        _control(pid, "-d")
    total = 0
    for dump in out.parent.glob(out.name + "*"):
        for line in dump.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total / calls


async def run(args: argparse.Namespace) -> None:
    rows: list[list[Any]] = []
    counted: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        root = Path(tmp)
        python = None if args.no_fastmcp else (args.fastmcp_python or install_fastmcp(root))
        # name: (the proxy under callgrind, the echo tool's name there, callgrind's output file)
        mcpmux_out, fastmcp_out = root / "mcpmux.cg", root / "fastmcp.cg"
        proxies: dict[str, tuple[AbstractContextManager[Any], str, Path]] = {
            "mcpmux serve --http": (
                mcpmux_serve(root / "mcpmux", "--http", "127.0.0.1:0", prefix=_callgrind(mcpmux_out)),
                "echo__echo",
                mcpmux_out,
            ),
        }
        if python is not None:
            proxy = fastmcp_proxy(python, prefix=_callgrind(fastmcp_out))
            proxies["fastmcp proxy (http)"] = (proxy, "echo", fastmcp_out)
        for name, (proxy, tool, out) in proxies.items():
            with proxy as (where, pid):
                url = where["http"] + "/mcp" if isinstance(where, dict) else where
                counted[name] = await _count(url, tool, pid, out, args.calls)
    fastmcp = counted.get("fastmcp proxy (http)")
    for name, per_call in counted.items():
        rows.append([name, per_call / 1000, f"{fastmcp / per_call:.2f}x" if fastmcp else "fastmcp not measured"])
    if fastmcp is None:
        rows.append(["fastmcp proxy (http)", "not measured", "-"])
    columns = ["proxy", "k instructions per call", "fewer than fastmcp (x)"]
    report("gateway_instructions", columns, rows, calls=args.calls)


def main() -> None:
    """Parse the options and count both proxies, one after the other."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="counted calls per proxy")
    parser.add_argument("--no-fastmcp", action="store_true", help="count mcpmux only")
    parser.add_argument("--fastmcp-python", type=Path, help="a python that has fastmcp (skips the install)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind is not installed (apt-get install valgrind): nothing measured", file=sys.stderr)
        return
    anyio.run(run, args)


if __name__ == "__main__":
    main()
