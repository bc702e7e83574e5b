"""Framing: parse time of one 1, 10 and 40 MB line fed in 64 KiB chunks vs ``json.loads`` and vs the
SDK's ``validate_json`` of the same bytes (what is left is the framing itself), and the peak memory of
skipping a 50 MB line above the cap (DESIGN section 5: < 1 s for 40 MB, linear, bounded).

Run: ``python bench/run.py framing``.
"""

from __future__ import annotations

import json
import time
import tracemalloc

from harness import report

from mcpmux.transports.framing import READ_CHUNK_BYTES, LineFramer, parse_message

MB = 1024 * 1024
SIZES_MB = (1, 10, 40)
OVERSIZED_MB = 50
CAP_BYTES = 16 * MB


def _line(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"'
    return head + b"x" * (size - len(head) - 4) + b'"}}\n'


def _framed_s(payload: bytes, cap: int) -> float:
    framer = LineFramer("bench", cap)
    start = time.perf_counter()
    items = [
        item
        for i in range(0, len(payload), READ_CHUNK_BYTES)
        for item in framer.feed(payload[i : i + READ_CHUNK_BYTES])
    ]
    elapsed = time.perf_counter() - start
    assert len(items) == 1
    return elapsed


def _json_loads_s(payload: bytes) -> float:
    start = time.perf_counter()
    json.loads(payload)
    return time.perf_counter() - start


def _validate_s(payload: bytes) -> float:
    start = time.perf_counter()
    parse_message(payload.rstrip(b"\n"))
    return time.perf_counter() - start


def _skip_peak_bytes(size: int, cap: int) -> int:
    framer = LineFramer("bench", cap)
    chunk = b"y" * READ_CHUNK_BYTES
    tracemalloc.start()
    try:
        for _ in range(size // READ_CHUNK_BYTES):
            framer.feed(chunk)
        framer.feed(b"\n")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    """Print and save the framing figures."""
    rows: list[list[object]] = []
    for size_mb in SIZES_MB:
        payload = _line(size_mb * MB)
        framed = min(_framed_s(payload, 64 * MB) for _ in range(3))
        loads = min(_json_loads_s(payload) for _ in range(3))
        validate = min(_validate_s(payload) for _ in range(3))
        rows.append([f"{size_mb} MB line", framed, loads, framed / loads, validate, framed / validate, ""])
    peak = _skip_peak_bytes(OVERSIZED_MB * MB, CAP_BYTES)
    rows.append([f"{OVERSIZED_MB} MB over a {CAP_BYTES // MB} MB cap", "", "", "", "", "", f"{peak / MB:.2f} MB"])
    columns = ["case", "framer s", "json.loads s", "vs loads", "SDK validate_json s", "vs validate", "peak memory"]
    report("framing", columns, rows)


if __name__ == "__main__":
    main()
