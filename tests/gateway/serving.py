"""``mcpmux serve`` as a real subprocess, with its own config and state, stopped by PID."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.forkserver import MCPMUX, REAL
from tests.peers.fixtures import stdio_command, stop_process_group

START_TIMEOUT_S = 90.0  # a bound (under the 120 s test timeout): on a loaded 2-core machine one took over 30 s
STOP_TIMEOUT_S = 15.0


@dataclass
class Serving:
    """A running ``mcpmux serve``: its process, bound addresses and environment."""

    process: subprocess.Popen[bytes]
    addresses: dict[str, str]
    env: dict[str, str]
    stderr: Path

    @property
    def url(self) -> str:
        return self.addresses["http"] + "/mcp"

    @property
    def base(self) -> str:
        return self.addresses["http"]

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then wait for a graceful exit; return the exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


def isolated_env(root: Path) -> dict[str, str]:
    """An environment whose config, data, cache and runtime directory live under ``root``, daemon off,
    project files trusted.

    Without its own runtime directory a command would meet (or, ``settings.daemon: auto``, start) the
    daemon in the shared ``/tmp/mcpmux-UID``, serving it with another environment's state.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MCPMUX_"))}
    runtime = root / "run"
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    env |= {
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_RUNTIME_DIR": str(runtime),
        "MCPMUX_DAEMON": "off",
        "MCPMUX_TRUST_PROJECT_FILES": "1",  # project files are the test's own (see tests/conftest.py)
        "HOME": str(root),
    }
    return env


def write_config(root: Path, servers: Sequence[str] = ("time", "everything"), **security: object) -> Path:
    """A config file of stdio peers (by name) with pinning off unless ``security`` says otherwise."""
    entries = []
    for name in servers:
        command, args = stdio_command(name)
        entries.append({"name": name, "type": "stdio", "command": command, "args": args})
    path = root / "mcpmux.json"
    path.write_text(json.dumps({"mcp": {"servers": entries, "security": {"pinning": "off", **security}}}))
    return path


def mcpmux(root: Path, config: Path, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one ``mcpmux`` command in the isolated environment of ``root``."""
    return subprocess.run(
        [MCPMUX, "--config", str(config), *args],
        env=isolated_env(root), capture_output=True, text=True, timeout=timeout_s, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@contextmanager
def serve(root: Path, config: Path, *args: str, real_process: bool = False) -> Iterator[Serving]:
    """``mcpmux serve ARGS`` until it announces every face; stopped (and its group killed) after.

    ``real_process``: the console script itself, not the fork server's child (tests/forkserver.py), for a
    test that looks at the process tree under ``Serving.process``.
    """
    env = isolated_env(root)
    stderr = root / "serve.stderr"
    with stderr.open("wb") as log:
        process = subprocess.Popen(
            [REAL if real_process else MCPMUX, "--config", str(config), "serve", *args],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )  # fmt: skip
    try:
        serving = Serving(process, _wait_for_faces(process, stderr, args), env, stderr)
        yield serving
    finally:
        stop_process_group(process)


def _wait_for_faces(process: subprocess.Popen[bytes], stderr: Path, args: Sequence[str]) -> dict[str, str]:
    wanted = {a.removeprefix("--") for a in args if a in ("--http", "--tcp", "--ws")}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = dict(re.findall(r"mcpmux: serving ((\w+)://[^\s/]+)", stderr.read_text(errors="replace")))
        addresses = {scheme: address for address, scheme in found.items()}
        if wanted <= addresses.keys():
            return addresses
        if process.poll() is not None:
            raise AssertionError(f"mcpmux serve exited with {process.returncode}: {stderr.read_text()}")
        time.sleep(0.05)
    raise AssertionError(f"mcpmux serve did not start in {START_TIMEOUT_S} s: {stderr.read_text()}")


@contextmanager
def listening(argv: Sequence[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` until it accepts on ``127.0.0.1:port``; stop its process group after."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"{argv} did not listen on {port}") from None
                time.sleep(0.05)
        yield process
    finally:
        stop_process_group(process)
