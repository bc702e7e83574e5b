"""The SQL storage attacked: hostile filter values, a database URL that would silently change, and
secrets of the URL in what is shown."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mcpmux.config import load_config
from mcpmux.errors import ConfigError
from mcpmux.manager.catalog import Catalog
from mcpmux.policy import Approvals, AuditLog, StateStore
from mcpmux.policy.approval import ApprovalScope
from mcpmux.servers.content_store import ContentStore
from mcpmux.sources import SourceRegistry
from tests.gateway.serving import MCPMUX, isolated_env
from tests.sources.conftest import KEY, database_url, postgres_server

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


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_every_database_is_private_in_a_data_dir_open_to_others(tmp_path: Path) -> None:
    """A data dir at an existing 0755 directory, a umask of 022: state.db (tokens, audit, pins),
    sources.db, the catalog and the content store, with their WAL files, are still 0600, and the
    command warns about the directory."""
    data = tmp_path / "shared-data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    env = {**isolated_env(tmp_path), "MCPMUX_DATA_DIR": str(data)}
    made = subprocess.run(
        [MCPMUX, "token", "create", "ci", "--json"], env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False, umask=0o022,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert f"the data directory {data} is open to group or others (mode 755)" in made.stderr
    assert f"chmod 700 {data}" in made.stderr
    registry = SourceRegistry(f"sqlite:///{data / 'sources.db'}", key=KEY)
    registry.all()
    registry.close()
    with Catalog(data / "catalog.db") as catalog:
        catalog.servers()
    ContentStore(data / "content.db").close()
    files = sorted(p.name for p in data.iterdir())
    assert {"state.db", "state.db.tokens", "sources.db", "catalog.db", "content.db"} <= set(files), files
    assert {name: _mode(data / name) for name in files} == dict.fromkeys(files, 0o600)


def test_a_database_found_open_to_others_is_narrowed_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state.db"
    with StateStore(path) as store:
        AuditLog(store).query()  # opened (the store opens its file at the first use)
    path.chmod(0o644)
    with caplog.at_level("WARNING", logger="mcpmux.store.sqlite"), StateStore(path) as store:
        AuditLog(store).query()
    assert _mode(path) == 0o600
    assert f"{path} was open to others (mode 644): now 0600" in caplog.text
