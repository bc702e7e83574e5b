"""The SQL storage attacked: hostile filter values, a database URL that would silently change, and
secrets of the URL in what is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpmux.config import load_config
from mcpmux.errors import ConfigError
from mcpmux.policy import Approvals, AuditLog, StateStore
from mcpmux.policy.approval import ApprovalScope
from tests.sources.conftest import database_url, postgres_server

__all__ = ["database_url", "postgres_server"]

HOSTILE = ["' OR 1=1 --", "fs'; DROP TABLE mcpmux_audit; --", "%", "*", "\x00", 'fs" OR "1"="1']


def test_hostile_filter_values_match_nothing_and_drop_nothing(database_url: str, tmp_path: Path) -> None:
    with StateStore(database_url) as store:
        audit = AuditLog(store)
        audit.record(
            face="gateway", caller="token:alice", server="fs", tool="read", name="fs:read", arguments={},
            decision="allowed", rule="default", duration_ms=None, outcome="ok",
        )  # fmt: skip
        approvals = Approvals(store, tmp_path)
        approvals.remember("fs", "read", ApprovalScope("gateway", "token:alice"))
        for value in HOSTILE:
            if "\x00" in value and database_url.startswith("postgresql"):
                continue  # PostgreSQL refuses NUL in text outright (an error, tested below)
            assert audit.query(server=value, caller=value, tool=value, outcome=value) == []
            assert approvals.forget(value) == 0 and approvals.forget("fs", value) == 0
            assert not approvals.remembered(value, value, ApprovalScope(value, value))
        assert len(audit.query()) == 1 and len(approvals.standing()) == 1


def test_a_storage_url_with_an_unset_variable_is_an_error_not_another_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": []}, "storage": {"url": "postgresql://u:${DB_PASSWORD}@db/m"}}))
    monkeypatch.delenv("DB_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="DB_PASSWORD"):
        load_config(path, cwd=tmp_path)
    monkeypatch.setenv("DB_PASSWORD", "pw-that-is-secret")
    config = load_config(path, cwd=tmp_path)
    assert config.storage.url == "postgresql://u:pw-that-is-secret@db/m"
    assert "pw-that-is-secret" in config.secret_values  # masked wherever mcpmux shows text


def test_the_password_of_an_unreachable_database_is_not_in_the_error(tmp_path: Path) -> None:
    store = StateStore("postgresql://admin:pw-that-is-secret@127.0.0.1:1/m?connect_timeout=5")
    with pytest.raises(ConfigError) as caught:
        Approvals(store, tmp_path).standing()
    assert "pw-that-is-secret" not in str(caught.value) and "admin:***@127.0.0.1:1" in str(caught.value)


def test_hostile_values_in_audited_calls_are_stored_verbatim_by_the_batched_writer(tmp_path: Path) -> None:
    # The SQLite audit writer binds its parameters itself (one executemany per batch): every hostile
    # value goes in as data, whole, in every column, and the table survives.
    with StateStore(tmp_path / "state.db") as store:
        audit = AuditLog(store)
        for value in [*HOSTILE, "x" * 1_000_000]:
            audit.record(
                face="gateway", caller=value, server=value, tool=value, name=f"{value}:{value}",
                arguments={value: value}, decision="allowed", rule=value, duration_ms=1.0, outcome="ok",
                error=value, result_bytes=len(value),
            )  # fmt: skip
        rows = list(reversed(audit.query(limit=100)))
    assert [r.server for r in rows] == [*HOSTILE, "x" * 1_000_000]
    for row in rows:
        value = row.server
        assert (row.caller, row.tool, row.rule, row.error, row.result_bytes) == (value, value, value, value, len(value))
        assert row.args == {value: value}
