"""The field suite's table: one row per server (transport, era, each face), printed and written as JSON.

A plugin (registered by ``tests/conftest.py``), not part of ``tests/field/conftest.py``: under
pytest-xdist the controller prints the summary but never loads the field conftest, and the rows are
made in whichever workers ran field tests. Each worker hands its rows to the controller in
``workeroutput``; the controller (or a run without xdist) prints them and writes
``.field-results/field.json`` at the repository root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.field.faces import FaceResult
from tests.field.servers import FACES, FIELD_SERVERS, FieldServer

__all__ = ["RESULTS"]

# Each server's faces, filled by ``tests/field/conftest.field_outcome`` in the process that ran them.
RESULTS: dict[str, dict[str, FaceResult]] = {}
_WORKER_ROWS: list[dict[str, Any]] = []
_RESULTS_DIR = Path(__file__).resolve().parents[2] / ".field-results"
_WORKER_KEY = "mcpmux_field_rows"


def _cell(server: FieldServer, face: str, result: FaceResult | None) -> str:
    if result is None:
        return "-"
    if face in server.known:
        return "XPASS" if result.ok else "xfail"
    return "ok" if result.ok else "FAIL"


def _rows() -> list[dict[str, Any]]:
    rows = []
    for server in FIELD_SERVERS:
        results = RESULTS.get(server.name)
        if results is None:
            continue
        era = results["test"].era or "-"
        row: dict[str, Any] = {
            "server": server.name,
            "package": server.package,
            "lang": server.lang,
            "sdk": server.sdk,
            "transport": server.transport,
            "era": era,
            "faces": {face: _cell(server, face, results.get(face)) for face in FACES},
            "details": {face: results[face].to_json() for face in FACES},
            "known": {face: bug.reason for face, bug in server.known.items()},
        }
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]]) -> list[str]:
    header = ["server", "lang", "sdk", "transport", "era", *FACES]
    body = [[r["server"], r["lang"], r["sdk"], r["transport"], r["era"], *r["faces"].values()] for r in rows]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    return ["  ".join(str(cell).ljust(w) for cell, w in zip(line, widths, strict=True)) for line in [header, *body]]


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints
        workeroutput[_WORKER_KEY] = json.dumps(_rows())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist (controller): keep the rows a finished worker made."""
    output = getattr(node, "workeroutput", None) or {}
    _WORKER_ROWS.extend(json.loads(output.get(_WORKER_KEY, "[]")))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workeroutput"):
        return
    order = {server.name: i for i, server in enumerate(FIELD_SERVERS)}
    rows = sorted([*_rows(), *_WORKER_ROWS], key=lambda row: order.get(row["server"], len(order)))
    if not rows:
        return
    terminalreporter.section("field suite: real MCP servers through every face of mcpmux")
    for line in _table(rows):
        terminalreporter.write_line(line)
    distinct = len({r["package"].split(" (")[0] for r in rows})
    terminalreporter.write_line(
        f"{len(rows)} rows, {distinct} distinct servers; xfail = a known bug (issue 14), XPASS = fixed: remove its mark"
    )
    payload = json.dumps({"rows": rows}, indent=1)
    target = _RESULTS_DIR / "field.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(payload + "\n", encoding="utf-8")
    terminalreporter.write_line(f"results: {target}")
