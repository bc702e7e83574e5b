"""The installed ``mcpmux`` as a shell runs it: exit codes of unusable servers, warnings once, the model
checked before any server starts, progress on a terminal only, and bash completion past the colon."""

from __future__ import annotations

import contextlib
import http.server
import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.forkserver import MCPMUX
from tests.peers.fixtures import free_port, http_thread

pytestmark = [pytest.mark.subprocess]

DEADLINE_S = 90.0


def mcpmux(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPMUX, *args], capture_output=True, text=True, timeout=DEADLINE_S, env=env or os.environ, check=False
    )


def write_config(project: Path, servers: str) -> None:
    (project / "mcpmux.yaml").write_text(f"mcp:\n  servers:\n{servers}", encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


class _Unauthorized(http.server.BaseHTTPRequestHandler):
    def _refuse(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_DELETE = _refuse

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def needs_auth_url() -> Iterator[str]:
    """A real HTTP server on a loopback port that answers every request with 401."""
    with http_thread(_Unauthorized) as port:
        yield f"http://127.0.0.1:{port}/mcp"


# -- unusable servers ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_tools_of_a_crashing_server_exits_3_and_says_why(project: Path) -> None:
    # Default retries: after its first attempt the server is `degraded`, retrying.
    write_config(
        project, "    - {name: crashing, type: stdio, command: sh, args: ['-c', 'echo boom on stderr >&2; exit 3']}\n"
    )
    run = mcpmux("tools", "crashing")
    assert run.returncode == 3, run.stderr
    assert "exited with code 3" in run.stderr and "boom on stderr" in run.stderr
    assert "0 tools" not in run.stderr + run.stdout


@pytest.mark.slow
def test_tools_of_every_server_warns_about_one_that_is_not_usable(project: Path) -> None:
    write_config(
        project,
        "    - {name: crashing, type: stdio, command: sh, args: ['-c', 'echo boom >&2; exit 3']}\n"
        "    - {name: workspace, type: builtin, root: .}\n",
    )
    run = mcpmux("tools")
    assert run.returncode == 0, run.stderr
    assert "workspace:read_file" in run.stdout
    assert run.stderr.count("warning: server 'crashing' is degraded") == 1 and "boom" in run.stderr


@pytest.mark.slow
def test_a_server_that_needs_authentication_exits_4_for_tools_and_call(project: Path, needs_auth_url: str) -> None:
    write_config(project, f"    - {{name: api, type: http, url: '{needs_auth_url}'}}\n")
    for args in (("tools", "api"), ("call", "api:anything", "a=1"), ("--json", "call", "api:anything")):
        run = mcpmux(*args)
        assert run.returncode == 4, (args, run.stderr)
        assert "HTTP 401" in run.stderr and "hint:" in run.stderr


@pytest.mark.slow
def test_a_warning_of_the_configuration_is_printed_once(project: Path) -> None:
    (project / "claude.json").write_text(
        '{"mcpServers": {"ws": {"command": "true", "unknownKey": 1}}}', encoding="utf-8"
    )
    for command in ("list", "tools", "show"):
        run = mcpmux("--config", "claude.json", command, *(["ws"] if command == "show" else []))
        assert run.stderr.count("unknownKey") == 1, (command, run.stderr)


# -- the model -----------------------------------------------------------------------------------------


def test_run_checks_the_model_settings_before_any_server_starts(project: Path) -> None:
    write_config(project, "    - {name: marker, type: stdio, command: sh, args: ['-c', 'touch STARTED; sleep 5']}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MCPMUX_MODEL")}
    run = mcpmux("run", "hello", env=env)
    assert run.returncode == 2, run.stderr
    assert "no API key" in run.stderr and "OPENAI_API_KEY" in run.stderr
    assert not (project / "STARTED").exists()


@pytest.mark.slow
def test_an_unreachable_model_endpoint_is_named_with_what_to_check(project: Path) -> None:
    write_config(project, "    - {name: workspace, type: builtin, root: .}\n")
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    run = mcpmux("run", "hello", "--base-url", url, "--model", "m")
    assert run.returncode == 1
    assert f"cannot reach the model endpoint {url}" in run.stderr
    assert "Connection error" not in run.stderr and "check llm.base_url" in run.stderr


# -- a terminal ------------------------------------------------------------------------------------------


def _read_pty(fd: int, process: subprocess.Popen[bytes]) -> bytes:
    seen = b""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    return seen


@pytest.mark.slow
def test_progress_names_the_pending_server_on_a_terminal_and_nothing_when_piped(project: Path) -> None:
    slow = "['-c', 'sleep 2; exec \"$0\" builtin workspace', " + repr(MCPMUX) + "]"
    write_config(project, f"    - {{name: slow, type: stdio, command: sh, args: {slow}}}\n")
    controller, terminal = pty.openpty()
    env = dict(os.environ, TERM="xterm", COLUMNS="120")
    process = subprocess.Popen(
        [MCPMUX, "tools", "slow"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, env=env
    )
    os.close(terminal)
    try:
        shown = _read_pty(controller, process).decode("utf-8", "replace")
        assert process.wait(timeout=DEADLINE_S) == 0
    finally:
        os.close(controller)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=DEADLINE_S)
        if process.stdout is not None:
            process.stdout.close()
    assert "waiting for slow" in shown and " s)" in shown
    piped = mcpmux("tools", "slow")
    assert piped.returncode == 0 and "connecting" not in piped.stderr


@pytest.mark.slow
def test_bash_completes_a_tool_name_past_the_colon(project: Path) -> None:
    write_config(project, "    - {name: filesystem, type: builtin, builtin: workspace, root: .}\n")
    assert mcpmux("refresh").returncode == 0  # the catalog that completion reads
    env = dict(
        os.environ, PS1="$ ", TERM="dumb", INPUTRC="/dev/null", PATH=f"{Path(MCPMUX).parent}:{os.environ['PATH']}"
    )
    controller, terminal = pty.openpty()
    shell = subprocess.Popen(
        ["bash", "--norc", "--noprofile", "-i"], stdin=terminal, stdout=terminal, stderr=terminal, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(terminal)
    try:
        _type_and_wait(controller, b'eval "$(mcpmux completion bash)"; echo READY\n', b"\nREADY")
        lines = []
        for typed in (b"mcpmux call fi", b"mcpmux call filesystem:re", b"mcpmux tools filesystem:wr"):
            # Readline handles the keys in order: TAB completes (a child mcpmux answers), then C-a goes
            # to the start of the line, where `echo LINE: ` turns the completed line into output.
            lines.append(_type_and_wait(controller, typed + b"\t\x01echo LINE: \n", b"\nLINE: "))
    finally:
        with contextlib.suppress(OSError):
            os.write(controller, b"exit\n")
        try:
            shell.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            shell.kill()
            shell.wait(timeout=DEADLINE_S)
        os.close(controller)
    assert lines == [
        "LINE: mcpmux call filesystem:",
        "LINE: mcpmux call filesystem:read_file",
        "LINE: mcpmux tools filesystem:write_file",
    ]


def _type_and_wait(fd: int, typed: bytes, marker: bytes) -> str:
    """Type ``typed``; return the output line that starts with ``marker`` (after a newline)."""
    os.write(fd, typed)
    seen = b""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        start = seen.find(marker)
        if start >= 0 and b"\r\n" in seen[start + len(marker) :]:
            return seen[start + 1 :].split(b"\r\n", 1)[0].decode("utf-8", "replace")
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen += os.read(fd, 65536)
    raise AssertionError(f"no {marker!r} from the shell within {DEADLINE_S} s: {seen!r}")
