"""``--json`` errors keep what the server said: its JSON-RPC ``code`` and ``data``, as the library's envelope."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forkserver import MCPMUX
from tests.gateway.serving import isolated_env

pytestmark = pytest.mark.subprocess

REJECTING = str(Path(__file__).resolve().parents[1] / "fixtures" / "rejecting_server.py")


def test_a_servers_json_rpc_error_keeps_its_code_and_data_in_json_output(tmp_path: Path) -> None:
    config = tmp_path / "mcpmux.json"
    entry = {"type": "stdio", "command": sys.executable, "args": [REJECTING]}
    config.write_text(json.dumps({"mcpServers": {"rej": entry}}))
    done = subprocess.run(
        [MCPMUX, "--config", str(config), "--json", "call", "rej:reject", '{"code": -32042, "message": "no way"}'],
        env=isolated_env(tmp_path), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    error = json.loads(done.stdout)["error"]
    assert error["type"] == "ServerError", error
    assert (error["server"], error["method"], error["code"]) == ("rej", "tools/call", -32042)
    assert error["data"] == {"fixture": "rejecting"}
    assert "no way" in error["message"]
