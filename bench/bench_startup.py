"""CLI start-up: ``mcpmux --help``, ``--version`` and ``config show`` against bare Python in one run.

Baselines: ``python -c pass`` (the floor) and ``python -c "import mcp"`` (what importing the SDK
eagerly would cost). Target: ``mcpmux --help`` <= 0.2 s.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import report

RUNS = 15


def _median_s(argv: list[str], cwd: str) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    python = sys.executable
    mcpmux = str(Path(python).parent / "mcpmux")
    cases = {
        "python -c pass": [python, "-c", "pass"],
        'python -c "import mcp"': [python, "-c", "import mcp.client.session"],
        "mcpmux --help": [mcpmux, "--help"],
        "mcpmux --version": [mcpmux, "--version"],
        "mcpmux config show": [mcpmux, "config", "show"],
    }
    with tempfile.TemporaryDirectory() as cwd:
        results = {name: _median_s(argv, cwd) for name, argv in cases.items()}
    floor = results["python -c pass"]
    rows = [[name, round(seconds, 4), round(seconds / floor, 2)] for name, seconds in results.items()]
    report("startup", ["command", "median s", "x python -c pass"], rows, runs=RUNS, target_help_s=0.2)


if __name__ == "__main__":
    main()
