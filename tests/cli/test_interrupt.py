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

CONSOLE_SCRIPT = str(Path(sys.executable).parent / "mcpmux")  # a terminal, Ctrl-C: the real process
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
        [CONSOLE_SCRIPT, "--config", str(config), *argv],
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


# A command body that swallows the first cancellation it sees (as library code has been seen to do
# with asyncio's one-shot cancel), then waits again; or that fails while it unwinds.
STUBBORN = """
import signal, sys
import anyio
from mcpmux.cli.running import run

async def body(how: str) -> str:
    print("ready", flush=True)
    try:
        await anyio.sleep(600)
    except anyio.get_cancelled_exc_class():
        if how == "fails":
            raise RuntimeError("the unwinding failed") from None
    await anyio.sleep(600)  # a swallowed cancel: only a cancellation that stays on ends this
    return "finished"

if sys.argv[1] == "ignored":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
try:
    print(run(body, sys.argv[1]), flush=True)
except KeyboardInterrupt as exc:
    print("interrupted", type(exc.__cause__).__name__, flush=True)
"""


@pytest.mark.parametrize(
    ("how", "expected"), [("swallows", "interrupted NoneType"), ("fails", "interrupted RuntimeError")]
)
def test_ctrl_c_stays_on_until_the_command_has_unwound(how: str, expected: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", STUBBORN, how], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=EXIT_WAIT_S)
        finally:
            if child.poll() is None:
                child.kill()
    assert out.strip() == expected


def test_a_ctrl_c_ignored_by_the_parent_stays_ignored() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", STUBBORN, "ignored"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            child.send_signal(signal.SIGINT)
            with pytest.raises(subprocess.TimeoutExpired):  # still waiting: the signal did nothing
                child.communicate(timeout=3)
        finally:
            child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL
