"""Rename-aware pins: what the listing-aware check costs against the plain hash check, in one run.

Rows (a 250-tool server, pins in a SQLite state file, scanner off):

- first sight: every tool of the first listing checked once (with the listing, the first check
  pins the whole listing);
- pinned: every tool checked again (the hot path after the first listing: no listing is read);
- newcomers: 25 tools vanish and 25 appear (renames of them, and unrelated tools), each checked
  once: the rename search compares a newcomer with every vanished pin.

Run: ``.venv/bin/python bench/bench_pins.py [--tools 250]``; prints the table, writes results/bench_pins.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import report

from mcpmux.policy.pins import PinBook
from mcpmux.policy.store import StateStore
from mcpmux.types.models import ToolInfo


def tool(name: str, index: int) -> ToolInfo:
    schema = {"type": "object", "properties": {"path": {"type": "string"}, f"opt{index}": {"type": "integer"}}}
    description = f"Tool {index}: does thing number {index} to the file at path, carefully and well."
    return ToolInfo.make(name=f"s:{name}", server="s", tool=name, description=description, input_schema=schema)


def timed(checks: Sequence[Callable[[], object]]) -> float:
    started = time.perf_counter()
    for check in checks:
        check()
    return (time.perf_counter() - started) / len(checks) * 1e6


def run(count: int, aware: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder, StateStore(Path(folder) / "state.db") as store:
        book = PinBook(store, "tofu")
        first = [tool(f"t{i}", i) for i in range(count)]

        def check(t: ToolInfo, listing: Sequence[ToolInfo]) -> Callable[[], object]:
            return lambda: book.check(t, listing=(lambda: listing) if aware else None)

        first_us = timed([check(t, first) for t in first])
        pinned_us = timed([check(t, first) for t in first])
        gone = count // 10
        renamed = [tool(f"r{i}", i) for i in range(gone // 2)]
        unrelated = [tool(f"n{i}", 10_000 + i) for i in range(gone - gone // 2)]
        later = [*first[gone:], *renamed, *unrelated]
        newcomer_us = timed([check(t, later) for t in [*renamed, *unrelated]])
        held = sum(not book.check(t, listing=(lambda: later) if aware else None).exposed for t in renamed + unrelated)
    return {"first": first_us, "pinned": pinned_us, "newcomer": newcomer_us, "held": held}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=250)
    count = parser.parse_args().tools
    plain, aware = run(count, aware=False), run(count, aware=True)
    rows = [
        (what, f"{plain[key]:.0f}", f"{aware[key]:.0f}", f"{aware[key] / plain[key]:.2f}x")
        for what, key in (("first sight", "first"), ("pinned (hot path)", "pinned"), ("newcomers", "newcomer"))
    ]
    rows.append(("newcomers held back", f"{plain['held']:.0f}", f"{aware['held']:.0f}", ""))
    report("bench_pins", ["us per check", "hash only", "rename-aware", "ratio"], rows, tools=count)


if __name__ == "__main__":
    main()
