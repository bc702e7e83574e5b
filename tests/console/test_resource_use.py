"""The console shows each stdio server's memory and CPU, and a restart past ``max_rss_mb`` with its reason.

Real processes: server-everything (Node) and mcp-server-time (Python) under ``mcpmux serve --http``;
``time`` gets a ``max_rss_mb`` far below its footprint, so the supervisor restarts it and backs off,
and the console's server page shows why in the state history (issue 25's console view).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.console.serving import console, write_console_config

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.network]

WAIT_S = 60.0


def test_memory_cpu_and_a_restart_past_max_rss_mb_are_shown(tmp_path: Path) -> None:
    config = write_console_config(tmp_path, ("everything", "time"), options={"time": {"max_rss_mb": 1}})
    with console(tmp_path, config) as running, running.signed_in("reader") as client:
        row = re.search(r'<tr data-server="everything">.*?</tr>', client.get("/ui/servers").text, re.DOTALL)
        assert row is not None
        megabytes = re.search(r"([\d.]+) MB · ([\d.]+) s", row.group(0))
        assert megabytes is not None and float(megabytes.group(1)) > 1, row.group(0)
        deadline = time.monotonic() + WAIT_S
        while "above max_rss_mb 1" not in (page := client.get("/ui/servers/time").text):
            assert time.monotonic() < deadline, page
            time.sleep(0.5)
        assert "max_rss_mb 1" in page
        assert "max_rss_mb 1<" in client.get("/ui/servers").text
