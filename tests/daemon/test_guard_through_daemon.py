"""The guard runs in the daemon too: approvals asked by the daemon are answered by the command's own approver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon, cli
from tests.daemon.test_daemon_lifecycle import _counter

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.timeout(300)]


def test_require_approval_refuses_and_yes_approves_the_same_with_and_without_the_daemon(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    mcp = {"servers": [_counter("counter")], "security": {"require_approval": True},
           "settings": {"connect_timeout_ms": 120_000}}  # fmt: skip
    (tmp_path / "mcpmux.yaml").write_text(json.dumps({"mcp": mcp}), encoding="utf-8")
    daemon.start("--linger", "600")
    for flags in (("--no-daemon",), ("--daemon",)):
        code, out, err = cli(*flags, "call", "counter:bump")
        assert (code, out) == (1, ""), err
        assert "was not approved: security.require_approval requires approval" in err
        code, out, err = cli(*flags, "call", "-y", "counter:bump")
        assert code == 0, err
        assert out.startswith("1 pid ")
    # The daemon's guard asked, the command's --yes answered (its audit writer stores rows behind the calls).
    daemon.wait_for(lambda: ("daemon", "ok") in _outcomes(), "the daemon's audit row")


def _outcomes() -> set[tuple[str, str]]:
    code, out, _ = cli("--json", "audit", "--server", "counter")
    assert code == 0
    return {(r["face"], r["outcome"]) for r in json.loads(out)}
