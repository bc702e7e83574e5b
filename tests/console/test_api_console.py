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
def api(root: Path, *args: str, config: Path | None = None) -> Iterator[tuple[str, Path]]:
    config = config or write_console_config(root, ("everything",))
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


@pytest.mark.slow
def test_a_read_session_sees_a_servers_failure_but_not_the_body_its_upstream_answered(tmp_path: Path) -> None:
    """Issue 43 item 6, on the console: the server pages show an upstream's answer body to admin only."""
    import json

    from tests.attacks.test_api_attacks import BODY, _answers_500_with_a_body

    with _answers_500_with_a_body() as url:
        config = tmp_path / "inner.json"
        inner = {"name": "inner", "type": "http", "url": url, "retry_attempts": 0}
        config.write_text(json.dumps({"mcp": {"servers": [inner], "security": {"pinning": "off"}}}))
        env = isolated_env(tmp_path)
        secrets = {}
        for name, scope in (("viewer", "read"), ("boss", "admin")):
            made = subprocess.run(
                [MCPMUX, "--config", str(config), "token", "create", name, "--scope", scope, "--json"],
                env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            secrets[scope] = json.loads(made.stdout)["token"]
        pages = {}
        with api(tmp_path, config=config) as (base, _stderr):
            deadline = time.monotonic() + 2 * START_TIMEOUT_S
            for scope, secret in secrets.items():
                with httpx.Client(base_url=base, timeout=30) as client:
                    login = client.post("/ui/login", data={"secret": secret}, headers={"Origin": base})
                    assert login.status_code == 303, login.text
                    while "HTTP 500 from" not in (page := client.get("/ui/servers/inner")).text:
                        assert time.monotonic() < deadline, page.text
                        time.sleep(0.2)
                    pages[scope] = page.text + client.get("/ui/servers").text
        assert BODY not in pages["read"] and "shown with the admin scope" in pages["read"]
        assert BODY in pages["admin"]
