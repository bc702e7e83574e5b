"""Issue 24's table in one command: every client of a stdio echo server, against the raw SDK, same run.

Rows: the raw SDK ``ClientSession`` (the baseline), mcpmux ``Connection``, ``Manager.call_tool``
and ``Guard.call_tool`` (policy, pins and one audit row per call: the path every face uses), the
same three with the lean path off (``MCPMUX_LEAN_PATH=0``: the SDK's dispatcher), the
``fastmcp.Client`` and a plain asyncio newline JSON-RPC client (the floor). Each client runs in its
own process (``_table_client.py``) against its own copy of the same SDK echo server. Columns:

- instructions per call: the client process under ``valgrind --tool=callgrind``, counted only
  around the calls (instrumentation switched on after the warm-up); noise-free, unlike time here;
- client CPU us per call and calls/s: ``--rounds`` interleaved rounds (sdk, connection, ..., sdk,
  ...), median of each;
- each as a ratio to the raw SDK.

Then, unless ``--no-more``: the gateway's instructions per proxied call against a fastmcp proxy
served on the same loop and HTTP parser as mcpmux (uvloop + httptools,
``bench_gateway_instructions.py``), the tool-count curve (``bench_scale.py``) and the 50-server
connect (``bench_connect.py``). fastmcp comes from ``--fastmcp-python`` or is installed into a
throw-away venv; valgrind from Debian. What is missing is reported "not measured".

Run: ``.venv/bin/python bench/bench_table.py [--calls 1000] [--counted 200] [--rounds 5]``;
``--concurrency 50`` measures calls 50 at a time instead (``results/table-concurrent-50.json``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

HERE = Path(__file__).parent
CLIENT = HERE / "_table_client.py"
KINDS = ("sdk", "connection", "manager", "guard", "connection-sdk-path", "manager-sdk-path", "guard-sdk-path",
         "fastmcp", "floor")  # fmt: skip
LABELS = {
    "sdk": "raw SDK ClientSession",
    "connection": "mcpmux Connection",
    "manager": "mcpmux Manager.call_tool",
    "guard": "mcpmux Guard.call_tool",
    "connection-sdk-path": "mcpmux Connection, lean path off",
    "manager-sdk-path": "mcpmux Manager.call_tool, lean path off",
    "guard-sdk-path": "mcpmux Guard.call_tool, lean path off",
    "fastmcp": "fastmcp Client",
    "floor": "plain asyncio JSON-RPC (floor)",
}
TIMEOUT_S = 900


def _python(kind: str, fastmcp: Path | None) -> str | None:
    return (str(fastmcp) if fastmcp else None) if kind == "fastmcp" else sys.executable


def timed(kind: str, python: str, echo: Path, calls: int, concurrency: int = 1) -> dict[str, float]:
    """One round of ``calls`` calls by ``kind`` (``concurrency`` at a time): calls/s and client CPU us per call."""
    out = subprocess.run(
        [python, str(CLIENT), kind, str(calls), "time", str(echo), sys.executable, str(concurrency)],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=True,
    )  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def counted(kind: str, python: str, echo: Path, calls: int, scratch: Path, concurrency: int = 1) -> float:
    """Instructions per call of the ``kind`` client process, counted by callgrind around the calls."""
    out = scratch / f"{kind}-{concurrency}.cg"
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
               python, str(CLIENT), kind, str(calls), "count", str(echo), sys.executable, str(concurrency)]  # fmt: skip
    pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen(command, text=True, **pipes)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        _expect(proc, "ready")
        _control(proc.pid, "-i", "on")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _expect(proc, "done")
        _control(proc.pid, "-i", "off")
        _control(proc.pid, "-d")
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    total = 0
    for dump in scratch.glob(out.name + "*"):
        for line in dump.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                total = max(total, int(line.split()[1]))
    return total / calls


def _expect(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == word:
            return
    raise RuntimeError(f"the client ended before saying {word!r} (exit code {proc.wait()})")


def _control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], capture_output=True, check=True, timeout=120)


def install_fastmcp(root: Path) -> Path | None:
    """fastmcp with uvloop and httptools (the loop and parser mcpmux serves on) in a venv under ``root``."""
    venv = root / "fastmcp-venv"
    python = venv / "bin" / "python"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "fastmcp", "uvloop", "httptools"], check=True,
                       capture_output=True, timeout=900)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"fastmcp did not install: {exc}", file=sys.stderr)
        return None
    return python


def client_rows(args: argparse.Namespace, fastmcp: Path | None, scratch: Path) -> list[list[Any]]:
    echo = scratch / "echo_server.py"
    from bench_connection import ECHO_SERVER

    echo.write_text(ECHO_SERVER)
    kinds = [kind for kind in KINDS if _python(kind, fastmcp) and (kind in args.kinds or kind == "sdk")]
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
        for kind in kinds:
            python = _python(kind, fastmcp)
            assert python is not None
            rounds[kind].append(timed(kind, python, echo, args.calls, args.concurrency))
    valgrind = shutil.which("valgrind") and shutil.which("callgrind_control")
    instructions: dict[str, float] = {}
    for kind in kinds if valgrind and args.counted else ():
        python = _python(kind, fastmcp)
        assert python is not None
        instructions[kind] = counted(kind, python, echo, args.counted, scratch, args.concurrency)
    rows: list[list[Any]] = []
    base_cpu = statistics.median(r["cpu_us"] for r in rounds["sdk"])
    base_rate = statistics.median(r["calls_per_s"] for r in rounds["sdk"])
    for kind in KINDS:
        if kind not in rounds:
            rows.append([LABELS[kind], "not measured", "-", "-", "-", "-", "-"])
            continue
        cpu = statistics.median(r["cpu_us"] for r in rounds[kind])
        rate = statistics.median(r["calls_per_s"] for r in rounds[kind])
        count = instructions.get(kind)
        ratio = f"{count / instructions['sdk']:.2f}x" if count and instructions.get("sdk") else "-"
        rows.append([LABELS[kind], round(count / 1e6, 3) if count else "not measured", ratio, round(cpu),
                     f"{cpu / base_cpu:.2f}x", round(rate), f"{rate / base_rate:.2f}x"])  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per client and round")
    parser.add_argument("--counted", type=int, default=200, help="calls counted under callgrind (0: none)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once (1: sequential)")
    parser.add_argument("--fastmcp-python", type=Path, help="a python with fastmcp, uvloop and httptools")
    parser.add_argument("--no-fastmcp", action="store_true")
    parser.add_argument("--kinds", default=",".join(KINDS), help="the client rows to measure (sdk always)")
    parser.add_argument("--no-more", action="store_true", help="only the client table (no gateway, scale, connect)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    args.kinds = args.kinds.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-table-") as tmp:
        scratch = Path(tmp)
        fastmcp = None if args.no_fastmcp else (args.fastmcp_python or install_fastmcp(scratch))
        rows = client_rows(args, fastmcp, scratch)
        how = "sequential" if args.concurrency <= 1 else f"{args.concurrency} concurrent"
        columns = [f"stdio echo, {how}", "M instructions/call", "vs SDK", "client CPU us/call", "vs SDK",
                   "calls/s (median)", "vs SDK"]  # fmt: skip
        name = "table" if args.concurrency <= 1 else f"table-concurrent-{args.concurrency}"
        report(name, columns, rows, calls=args.calls, counted=args.counted, rounds=args.rounds,
               concurrency=args.concurrency)  # fmt: skip
        if args.no_more:
            return
        more = [sys.executable, str(HERE / "bench_gateway_instructions.py")]
        more += ["--fastmcp-python", str(fastmcp)] if fastmcp else ["--no-fastmcp"]
        subprocess.run(more, check=False, timeout=3 * TIMEOUT_S)
        subprocess.run([sys.executable, str(HERE / "bench_scale.py")], check=False, timeout=3 * TIMEOUT_S)
        subprocess.run([sys.executable, str(HERE / "bench_connect.py")], check=False, timeout=3 * TIMEOUT_S)


if __name__ == "__main__":
    main()
