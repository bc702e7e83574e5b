"""The audit log's write path: one serialisation per row, redaction as before, no row lost."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from mcpmux.policy import audit as audit_module
from mcpmux.policy.audit import AuditLog, argument_digest, digest_and_redact, redact_arguments
from mcpmux.policy.store import StateStore

SECRETS = ("hunter2-secret", 'quo"te\\d', "tab\tbed", "\u00e9t\u00e9-key")


def record(audit: AuditLog, arguments: dict[str, Any], n: int = 0) -> None:
    audit.record(
        face="library", caller=None, server="fs", tool="read_file", name="fs:read_file", arguments=arguments,
        decision="allowed", rule="default", duration_ms=1.0, outcome="ok", result_bytes=n,
    )  # fmt: skip


def rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        (count,) = db.execute("SELECT count(*) FROM mcpmux_audit").fetchone()
    return int(count)


def test_a_row_serialises_its_arguments_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    encoder = audit_module._CANONICAL

    class Counting:
        def encode(self, value: object) -> str:
            calls.append(value)
            return encoder.encode(value)

    with StateStore(tmp_path / "state.db") as store:
        audit = AuditLog(store, SECRETS)
        monkeypatch.setattr(audit_module, "_CANONICAL", Counting())
        record(audit, {"path": "/srv/notes.txt", "limit": 3, "nested": {"tags": ["a", "b"]}})
        monkeypatch.undo()
        assert len(calls) == 1
        [row] = audit.query()
        assert row.args == {"path": "/srv/notes.txt", "limit": 3, "nested": {"tags": ["a", "b"]}}
        assert row.args_digest == argument_digest(row.args)


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([*SECRETS, "ghp_" + "A1b2" * 4, "\nghp_" + "Z9" * 8, "x sk-" + "q" * 14, "plain"]),
    st.text(max_size=12),
)
KEYS = st.sampled_from(["path", "password", "api_key", "Authorization", "query", "t\u00e9", "note"])
ARGUMENTS = st.recursive(
    JSON_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3)
)


@settings(max_examples=400, deadline=None)
@given(arguments=st.dictionaries(KEYS, ARGUMENTS, max_size=4), glue=st.sampled_from(["", " ", "\n", '"', "/"]))
def test_the_digest_and_the_stored_arguments_are_what_they_were(arguments: dict[str, Any], glue: str) -> None:
    arguments = {**arguments, "joined": glue.join(str(v) for v in arguments.values())}
    digest, stored = digest_and_redact(arguments, SECRETS)
    assert digest == argument_digest(arguments)
    assert json.loads(stored) == json.loads(json.dumps(redact_arguments(arguments, SECRETS), default=str))
    assert not any(secret in stored or json.dumps(secret)[1:-1] in stored for secret in SECRETS)


def test_rows_queued_at_close_are_written(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = StateStore(path)
    audit = AuditLog(store)
    for n in range(2000):
        record(audit, {"n": n}, n)
    store.close()
    assert rows(path) == 2000


def test_a_process_that_exits_without_closing_writes_every_audit_row(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    code = (
        "import sys\n"
        "from mcpmux.policy.audit import AuditLog\n"
        "from mcpmux.policy.store import StateStore\n"
        "audit = AuditLog(StateStore(sys.argv[1]))\n"
        "for n in range(3000):\n"
        "    audit.record(face='library', caller=None, server='fs', tool='t', name='fs:t', arguments={'n': n},\n"
        "                 decision='allowed', rule='default', duration_ms=1.0, outcome='ok')\n"
        "sys.exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
    assert rows(path) == 3000


def _audit_rows(count: int, **overrides: object) -> list[dict[str, object]]:
    return [
        {"at": float(i), "face": "library", "caller": None, "server": "fs", "tool": "t", "name": "fs:t",
         "args_digest": str(i), "args": "{}", "decision": "allowed", "rule": "default", "duration_ms": 1.0,
         "outcome": "ok", "error": None, "result_bytes": i, **overrides}
        for i in range(count)
    ]  # fmt: skip


def test_a_batch_of_rows_is_one_statement_per_table_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The writer thread commits what queued up in one go: one executemany per run of alike rows
    # (on SQLite straight on the pool's connection, the statement compiled once), not one per row.
    from mcpmux.policy.schema import audit as audit_table

    with StateStore(tmp_path / "state.db") as store:
        compiled: list[tuple[str, ...]] = []
        original = store._insert_sql

        def counting(table: object, columns: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
            compiled.append(columns)
            return original(table, columns)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "_insert_sql", counting)
        store._commit([(audit_table, row) for row in _audit_rows(30)])
        written = AuditLog(store).query(limit=100)
    assert len(compiled) == 1, compiled
    assert [row.result_bytes for row in reversed(written)] == list(range(30))  # in the order queued


def test_rows_written_on_the_fast_path_read_back_field_for_field(tmp_path: Path) -> None:
    # The SQLite path binds parameters itself: every column lands in its own place.
    with StateStore(tmp_path / "state.db") as store:
        log = AuditLog(store, ["s3cr3t-value"])
        log.record(
            face="gateway", caller="alice", server="fs", tool="write", name="fs:write", arguments={"a": [1, "x"]},
            decision="asked", rule="r1", duration_ms=2.5, outcome="error", error="boom s3cr3t-value",
            result_bytes=None,
        )  # fmt: skip
        (row,) = log.query()
    assert (row.face, row.caller, row.server, row.tool, row.name) == ("gateway", "alice", "fs", "write", "fs:write")
    assert (row.args, row.decision, row.rule, row.duration_ms) == ({"a": [1, "x"]}, "asked", "r1", 2.5)
    assert (row.outcome, row.error, row.result_bytes) == ("error", "boom ****", None)
    assert row.args_digest == argument_digest({"a": [1, "x"]})


def test_a_bad_row_in_a_batch_does_not_take_the_others_with_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcpmux.policy.schema import audit as audit_table

    good = _audit_rows(3)
    bad = _audit_rows(1, face=None)[0]  # NOT NULL: refused by the database
    with StateStore(tmp_path / "state.db") as store:
        store._commit([(audit_table, good[0]), (audit_table, bad), (audit_table, good[1]), (audit_table, good[2])])
        written = AuditLog(store).query(limit=100)
    assert sorted(row.result_bytes or 0 for row in written) == [0, 1, 2]
    assert "1 rows could not be written" in caplog.text
