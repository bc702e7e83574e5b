"""Ctrl-C while servers connect: the real ``mcpmux`` stops at once with exit 130, children reaped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

MCPMUX = str(Path(sys.executable).parent / "mcpmux")
SLOW = Path(__file__).resolve().parents[1] / "fixtures" / "slow_server.py"
SERVERS = 3
SPAWN_WAIT_S = 60.0
# The bug waited out the whole connect timeout (~34 s at the default). Here the servers never answer
# and the connect timeout is 10 minutes, so an exit within a minute is the interrupt's doing however
# loaded the machine (a stop takes seconds; at a load average of 30 it took over 20).
CONNECT_TIMEOUT_MS = 600_000
EXIT_WAIT_S = 60.0


def slow_config(tmp_path: Path) -> Path:
    lines = ["mcp:", "  servers:"]
    for i in range(SERVERS):
        lines.append(
            f"    - {{name: slow{i}, type: stdio, command: {sys.executable}, args: [-S, -E, {SLOW}],"
            f" env: {{SLOW_START_S: '3600'}}, connect_timeout_ms: {CONNECT_TIMEOUT_MS}}}"
        )
    path = tmp_path / "mcpmux.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wait_for_children(process: psutil.Process, count: int) -> list[psutil.Process]:
    deadline = time.monotonic() + SPAWN_WAIT_S
    while True:
        servers = [c for c in process.children(recursive=True) if "slow_server.py" in " ".join(c.cmdline())]
        if len(servers) >= count:
            return servers
        assert time.monotonic() < deadline, "the servers were never started"
        time.sleep(0.05)


def alive(processes: list[psutil.Process]) -> list[int]:
    survivors = []
    for child in processes:
        try:
            if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                survivors.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return survivors


@pytest.mark.timeout(SPAWN_WAIT_S + EXIT_WAIT_S + 60)
@pytest.mark.parametrize(
    ("argv", "servers"), [(["list"], SERVERS), (["call", "slow0:echo", "{}"], 1), (["test", "slow0"], 1)]
)
def test_ctrl_c_while_servers_connect_exits_130_at_once_and_reaps_them(
    tmp_path: Path, argv: list[str], servers: int
) -> None:
    config = slow_config(tmp_path)
    command = subprocess.Popen(
        [MCPMUX, "--config", str(config), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        children = wait_for_children(psutil.Process(command.pid), servers)
        command.send_signal(signal.SIGINT)
        _out, err = command.communicate(timeout=EXIT_WAIT_S)
    finally:
        if command.poll() is None:
            command.kill()
            command.communicate()
    assert command.returncode == 130, err
    assert "survived" not in err
    assert alive(children) == []
