"""``mcpmux api`` serves the console at ``/ui`` too (over its own runtime), and ``--no-ui`` turns it off."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.console.serving import write_console_config
from tests.gateway.serving import MCPMUX, isolated_env
from tests.peers.fixtures import stop_process_group

pytestmark = [pytest.mark.subprocess, pytest.mark.network]

START_TIMEOUT_S = 30.0


@contextmanager
def api(root: Path, *args: str) -> Iterator[tuple[str, Path]]:
    config = write_console_config(root, ("everything",))
    stderr = root / "api.stderr"
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            [MCPMUX, "--config", str(config), "api", "--http", "127.0.0.1:0", *args],
            env=isolated_env(root), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (found := re.search(r"serving (http://[^/\s]+)/api", stderr.read_text())):
            assert process.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.05)
        yield found.group(1), stderr
    finally:
        stop_process_group(process)


def test_the_api_serves_the_console_signed_in_with_the_key(tmp_path: Path) -> None:
    with api(tmp_path) as (base, stderr), httpx.Client(base_url=base, timeout=30) as client:
        key = re.search(r"console key (\S+)", stderr.read_text())
        assert key is not None
        assert client.get("/ui/servers").status_code == 303
        login = client.post("/ui/login", data={"secret": key.group(1)}, headers={"Origin": base})
        assert login.status_code == 303
        deadline = time.monotonic() + START_TIMEOUT_S
        while "everything:echo" not in (page := client.get("/ui/tools")).text:  # the API starts servers lazily
            assert time.monotonic() < deadline, page.text
            time.sleep(0.2)
        assert client.get("/ui/sources").status_code == 200
        assert client.get("/api/servers").status_code == 200  # the API beside it, unchanged


def test_no_ui_serves_only_the_api(tmp_path: Path) -> None:
    with api(tmp_path, "--no-ui") as (base, stderr), httpx.Client(base_url=base, timeout=30) as client:
        assert client.get("/ui/login").status_code == 404
        assert "console key" not in stderr.read_text()
