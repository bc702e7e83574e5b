"""The shared SQLite helper: appends written behind the caller, and never lost on the way out."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mcpmux.store import sqlite as storage
from mcpmux.store.sqlite import Database

SCHEMA = "CREATE TABLE IF NOT EXISTS rows (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, writer TEXT)"
INSERT = "INSERT INTO rows (n, writer) VALUES (?, ?)"


def count(path: Path) -> int:
    """Rows in the file, seen through a separate connection (another reader, as another process would)."""
    with sqlite3.connect(path) as db:
        (rows,) = db.execute("SELECT count(*) FROM rows").fetchone()
    return int(rows)


def test_appends_are_written_in_order_and_visible_to_the_caller_and_to_other_readers(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:
        for n in range(500):
            database.append(INSERT, (n, "main"))
        with database.read() as db:  # a read waits for what this process queued
            assert [n for (n,) in db.execute("SELECT n FROM rows ORDER BY id")] == list(range(500))
        assert count(path) == 500


def test_close_writes_what_is_still_queued(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    database = Database(path, SCHEMA, 1, disposable=False)
    for n in range(200):
        database.append(INSERT, (n, "main"))
    database.close()
    assert count(path) == 200


def test_appends_from_many_threads_all_arrive(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:

        def writer(name: str) -> None:
            for n in range(250):
                database.append(INSERT, (n, name))

        threads = [threading.Thread(target=writer, args=(f"t{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        database.flush()
        assert count(path) == 1000


def test_a_process_that_exits_without_closing_still_writes_every_row(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    code = (
        "import sys; from mcpmux.store.sqlite import Database\n"
        f"db = Database(sys.argv[1], {SCHEMA!r}, 1, disposable=False)\n"
        f"for n in range(1000): db.append({INSERT!r}, (n, 'child'))\n"
        "sys.exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)
    assert count(path) == 1000


def test_the_writer_thread_ends_when_idle_and_a_new_append_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "WRITER_IDLE_S", 0.05)
    with Database(tmp_path / "state.db", SCHEMA, 1, disposable=False) as database:
        database.append(INSERT, (1, "main"))
        database.flush()
        first = database._appender._writer
        assert first is not None
        first.join(timeout=5)
        assert not first.is_alive() and database._appender._writer is None
        database.append(INSERT, (2, "main"))
        database.flush()
        assert count(tmp_path / "state.db") == 2


def test_a_row_that_cannot_be_written_is_reported_and_does_not_take_its_batch_with_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:
        with database._appender._queue:  # hold the writer back so the three rows go in one batch
            database.append(INSERT, (1, "good"))
            database.append(INSERT, (None, "bad"))  # n is NOT NULL
            database.append(INSERT, (3, "good"))
        database.flush()
    assert count(path) == 2
    assert "1 rows could not be written" in caplog.text and "NOT NULL" in caplog.text


def test_a_busy_file_is_tried_again_before_rows_are_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage.time, "sleep", lambda s: None)
    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:
        with database.write() as db:
            db.execute("PRAGMA busy_timeout = 0")  # fail at once while another holds the lock
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        database.append(INSERT, (1, "main"))
        database.flush()
        other.execute("ROLLBACK")
        other.close()
    assert caplog.text.count("trying again") == storage.APPEND_ATTEMPTS - 1
    assert "1 rows could not be written" in caplog.text and "locked" in caplog.text


def test_a_flush_waits_a_bounded_time_for_a_locked_file_and_the_rows_follow_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "FLUSH_TIMEOUT_S", 0.3)
    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:
        with database.read():
            pass  # creates the file and its schema
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        database.append(INSERT, (1, "main"))
        database.flush()
        assert "queued rows are not written yet" in caplog.text  # and the caller went on
        other.execute("COMMIT")
        other.close()
        database.flush()
        assert count(path) == 1


def test_the_writer_is_woken_when_its_queue_fills_not_for_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wakes: list[int] = []

    class CountingCondition(threading.Condition):
        def notify_all(self) -> None:
            wakes.append(1)
            super().notify_all()

    path = tmp_path / "state.db"
    with Database(path, SCHEMA, 1, disposable=False) as database:
        monkeypatch.setattr(database._appender, "_queue", CountingCondition())
        database.append(INSERT, (0, "main"))  # starts the writer
        database.flush()
        with database._lock:  # the writer takes its next batch, then waits for the file
            for n in range(1, 1000):
                database.append(INSERT, (n, "main"))
        database.flush()
        assert count(path) == 1000
    # One wake when the queue filled again, plus the writer's own after each batch (flushers wait on it).
    assert len(wakes) <= 8, len(wakes)


@pytest.mark.parametrize("part", ["mcpmux.policy.store", "mcpmux.sources.db"])
def test_each_parts_known_head_is_the_newest_migration(part: str) -> None:
    # The head is what an open database is compared with before Alembic is loaded: it must not rot.
    import importlib

    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

    migrations = importlib.import_module(part).MIGRATIONS
    config = AlembicConfig()
    config.set_main_option("script_location", str(migrations.location))
    assert ScriptDirectory.from_config(config).get_current_head() == migrations.head
