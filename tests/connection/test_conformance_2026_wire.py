"""``auto`` reaches the conformance suite's 2026-07-28 mock servers over real loopback HTTP.

Those servers answer ``initialize`` with -32020 (missing ``MCP-Protocol-Version`` header); the
client (``tests/conformance/client.py``, a ``Connection`` with ``protocol: auto``) must move to
``server/discover`` and act the scenario out.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.test_conformance import CLIENT
from tests.peers.fixtures import conformance_2026_cli, loopback_only_command

pytestmark = [pytest.mark.peers, pytest.mark.subprocess, pytest.mark.network]

RUN_TIMEOUT_S = 180


def test_auto_acts_out_tools_call_on_the_2026_wire(tmp_path: Path) -> None:
    command = f"{sys.executable} {CLIENT}"
    suite = [*conformance_2026_cli(), "client", "--command", command, "--scenario", "tools_call"]
    argv, env = loopback_only_command([*suite, "--spec-version", "2026-07-28", "-o", str(tmp_path)])
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    (checks_file,) = tmp_path.rglob("checks.json")
    statuses = {check["id"]: check["status"] for check in json.loads(checks_file.read_text())}
    assert "SUCCESS" in statuses.values(), run.stdout + run.stderr
    assert not {"FAILURE", "WARNING"} & set(statuses.values()), (statuses, run.stdout[-2000:], run.stderr[-2000:])
    assert run.returncode == 0, run.stdout[-2000:]
