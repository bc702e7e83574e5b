"""The tests' fork server (tests/forkserver.py) stands in for a real ``mcpmux`` process where tests use it:
the same output and exit, the caller's directory, environment and streams, signals passed on, nothing left
running when its shim is killed, and the real console script whenever the interpreter would start
differently."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from tests import forkserver
from tests.gateway.serving import isolated_env

pytestmark = pytest.mark.subprocess

WAIT_S = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[forkserver.ForkServer]:
    """A fork server of the test's own (the worker's is shared with the other tests)."""
    started = forkserver.start()
    assert started is not None, "the fork server did not start"
    try:
        yield started
    finally:
        started.stop()


def _run(program: str | Path, args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(program), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT_S,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def _children(server: forkserver.ForkServer) -> list[psutil.Process]:
    return [p for p in psutil.Process(server.process.pid).children() if p.status() != psutil.STATUS_ZOMBIE]


def _child(server: forkserver.ForkServer, shim: subprocess.Popen[str]) -> psutil.Process:
    """The one child of the fork server, standing for ``shim``."""
    children = _children(server)
    assert len(children) == 1, (children, psutil.Process(shim.pid).cmdline(), server.log())
    return children[0]


def _wait(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_command_answers_as_the_real_one_in_the_callers_directory_and_environment(
    server: forkserver.ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "here.json").write_text(json.dumps({"mcpServers": {}}))
    env = isolated_env(tmp_path)
    cases = [
        ["--version"],
        ["--config", "here.json", "--json", "tools"],  # relative to the caller's directory
        ["--config", "missing.json", "tools"],  # exit 2, the error on stderr
        ["--json", "config", "path"],  # where MCPMUX_CONFIG says
    ]
    env["MCPMUX_CONFIG"] = str(tmp_path / "here.json")
    for args in cases:
        assert _run(server.shim, args, tmp_path, env) == _run(forkserver.REAL, args, tmp_path, env), args
    assert not _children(server)


@contextmanager
def _serving(server: forkserver.ForkServer, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """``mcpmux serve --http`` through the shim, once it serves; killed after the test whatever happened."""
    config = tmp_path / "m.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    process = subprocess.Popen(
        [str(server.shim), "--config", str(config), "serve", "--http", "127.0.0.1:0"],
        cwd=tmp_path, env=isolated_env(tmp_path), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=lambda: os.umask(0o027),
    )  # fmt: skip
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(2)]  # the console's key, then the address
        assert any("mcpmux: serving http://" in line for line in lines), lines
        yield process
    finally:
        process.kill()
        process.wait(WAIT_S)
        if process.stderr is not None:
            process.stderr.close()


def test_a_signal_to_the_shim_reaches_the_child(server: forkserver.ForkServer, tmp_path: Path) -> None:
    with _serving(server, tmp_path) as process:
        child = _child(server, process)
        assert child.cwd() == str(tmp_path)
        status = Path(f"/proc/{child.pid}/status").read_text()
        assert "Umask:\t0027" in status, status  # the shim's, as its caller set it
        process.send_signal(signal.SIGTERM)
        assert process.wait(WAIT_S) == 0  # what a real `mcpmux serve` answers SIGTERM with
        assert process.stderr is not None and "mcpmux: stopped" in process.stderr.read()
        _wait(lambda: not _children(server), "the child outlived its shim")


def test_a_killed_shim_takes_its_child_along(server: forkserver.ForkServer, tmp_path: Path) -> None:
    with _serving(server, tmp_path) as process:
        child = _child(server, process)
        process.kill()
        assert process.wait(WAIT_S) == -signal.SIGKILL
    _wait(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, "the child outlived its shim")


def test_a_child_killed_by_a_signal_is_reported_as_killed_by_it(server: forkserver.ForkServer, tmp_path: Path) -> None:
    with _serving(server, tmp_path) as process:
        child = _child(server, process)
        child.send_signal(signal.SIGKILL)
        assert process.wait(WAIT_S) == -signal.SIGKILL


def test_another_interpreter_set_up_runs_the_real_console_script(server: forkserver.ForkServer, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nprint('customized', file=sys.stderr)\n")
    env = isolated_env(tmp_path) | {"PYTHONPATH": str(site)}
    code, out, err = _run(server.shim, ["--version"], tmp_path, env)
    assert (code, out) == (0, f"mcpmux, version {_version()}\n")
    assert "customized" in err  # the interpreter read PYTHONPATH: a fresh one, not a forked child
    assert not _children(server)


@pytest.mark.parametrize("variable", ["COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG"])
def test_coverage_measuring_children_runs_the_real_console_script(
    server: forkserver.ForkServer, tmp_path: Path, variable: str
) -> None:
    rc = tmp_path / "coveragerc"
    rc.write_text(f"[run]\ndata_file = {tmp_path / 'coverage-data'}\nparallel = true\n")
    config = tmp_path / "m.json"
    config.write_text(json.dumps({"mcpServers": {}}))
    process = subprocess.Popen(
        [str(server.shim), "--config", str(config), "serve", "--http", "127.0.0.1:0"],
        cwd=tmp_path, env=isolated_env(tmp_path) | {variable: str(rc)}, stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        lines: list[str] = []
        while len(lines) < 200 and not any("mcpmux: serving http://" in line for line in lines):
            lines.append(process.stderr.readline())  # coverage's own start-up says what it makes of the value
        assert any("mcpmux: serving http://" in line for line in lines), lines
        assert not _children(server)  # no forked child: the shim became the console script
        assert forkserver.REAL in psutil.Process(process.pid).cmdline()
    finally:
        process.kill()
        process.wait(WAIT_S)
        if process.stderr is not None:
            process.stderr.close()


def test_without_its_fork_server_the_shim_runs_the_real_console_script(
    server: forkserver.ForkServer, tmp_path: Path
) -> None:
    server.process.terminate()
    server.process.wait(WAIT_S)
    code, out, _ = _run(server.shim, ["--version"], tmp_path, isolated_env(tmp_path))
    assert (code, out) == (0, f"mcpmux, version {_version()}\n")


def _version() -> str:
    from mcpmux import __version__

    return __version__


def test_every_test_module_runs_the_mcpmux_this_worker_runs() -> None:
    """A module that took ``MCPMUX`` by value before ``pytest_configure`` started the worker's fork server
    (the root conftest's plugins import theirs first) ran the console script in every test, silently: the
    field suite did, at 2.3 s of CPU a child. Each module's name must be what the worker runs now (a module
    that means the console script names it otherwise: ``forkserver.REAL``, ``CONSOLE_SCRIPT``)."""
    import sys

    from tests.field.faces import mcpmux_argv

    assert mcpmux_argv(Path("c.yaml"), "tools")[0] == forkserver.MCPMUX
    stale = {
        name: module.MCPMUX
        for name, module in list(sys.modules.items())
        if name.startswith("tests.") and isinstance(getattr(module, "MCPMUX", None), str)
        if module.MCPMUX != forkserver.MCPMUX
    }
    assert stale == {}, f"bound MCPMUX before the fork server started; read forkserver.MCPMUX when called: {stale}"
