"""Shared output for benchmarks: a printed table and a JSON file in ``bench/results/``.

Every benchmark measures against a baseline in the same run and reports ratios, never absolute
pass/fail thresholds (those belong to no test).
"""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).parent / "results"


def report(name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], **extra: Any) -> Path:
    """Print ``rows`` as an aligned table titled ``name`` and write them as ``results/<name>.json``.

    Returns the path of the JSON file.
    """
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n## {name}")
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {
        "name": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "columns": list(columns),
        "rows": [list(r) for r in rows],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)
