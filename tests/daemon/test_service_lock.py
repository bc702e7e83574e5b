"""Who holds the daemon's lock: a reader that races a daemon taking it still learns its pid."""

from __future__ import annotations

import fcntl
import os
import time
import types
from pathlib import Path

import pytest

from mcpmux.daemon import service
from mcpmux.daemon.service import already_serving


def test_a_lock_nobody_holds_names_no_daemon(tmp_path: Path) -> None:
    lock = tmp_path / "daemon.lock"
    assert already_serving(lock) is None
    lock.write_text("4242")
    assert already_serving(lock) is None  # a file left by a daemon that is gone: no lock on it


def test_a_reader_racing_the_holder_waits_for_the_pid_it_writes_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The holder's order (serve_daemon): take the lock, truncate, write the pid. A second daemon that lost
    # the race read the file in between and announced "pid -1". Here the holder writes its pid while the
    # reader waits after its first (empty) read.
    lock = tmp_path / "daemon.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        if not waits:
            os.write(fd, b"4242")
        waits.append(seconds)

    monkeypatch.setattr(service, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert already_serving(lock) == 4242
        assert len(waits) == 1
    finally:
        os.close(fd)


def test_a_holder_that_never_writes_its_pid_is_named_minus_one_after_a_bounded_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "daemon.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(service, "time", types.SimpleNamespace(monotonic=lambda: clock[0], sleep=sleep))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert already_serving(lock) == -1
        assert clock[0] >= service.PID_WAIT_S
    finally:
        os.close(fd)
