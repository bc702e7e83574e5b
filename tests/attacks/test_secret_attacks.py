"""Attack: make mcpmux print or write a secret it was given through the environment.

The secrets below have shapes that no name- or shape-based rule catches (short, no digits run, plain
names): only "it came from an environment variable" identifies them. Each test drives the installed
``mcpmux`` script as a user would and then searches everything it printed and wrote.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.forkserver import MCPMUX
from tests.gateway.serving import serve

pytestmark = pytest.mark.subprocess

ARG_SECRET = "argsecret-plain"
URL_SECRET = "querysecret-plain"
ENV_SECRET = "childsecret-plain"
# A token that a user pastes into a tool argument under a harmless key.
PASTED_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"

LEAKY_SERVER = """\
import os, sys
from mcp.server import MCPServer
print("starting with token", os.environ.get("UPSTREAM_KEY"), "and args", sys.argv[1:], file=sys.stderr, flush=True)
server = MCPServer("leaky")

@server.tool()
def echo(text: str) -> str:
    "Echo the text back."
    print("echo called; my key is", os.environ.get("UPSTREAM_KEY"), file=sys.stderr, flush=True)
    return text

server.run()
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY_SERVER, encoding="utf-8")
    (tmp_path / "mcpmux.yaml").write_text(
        f"""\
mcp:
  servers:
    - name: leaky
      type: stdio
      command: {sys.executable}
      args: ["{script}", "--key", "${{PLAIN_ARG}}"]
      env: {{UPSTREAM_KEY: "${{PLAIN_ENV}}"}}
    - name: remote
      type: http
      url: "http://127.0.0.1:9/mcp?key=${{PLAIN_URL}}"
      enabled: false
  settings: {{connect_timeout_ms: 60000, retry_attempts: 0}}
  security: {{pinning: "off", require_approval: false}}
""",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PLAIN_ARG", ARG_SECRET)
    monkeypatch.setenv("PLAIN_URL", URL_SECRET)
    monkeypatch.setenv("PLAIN_ENV", ENV_SECRET)
    return tmp_path


def mcpmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPMUX, *args],
        capture_output=True,
        text=True,
        env=os.environ,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def assert_no_secret(text: str, where: str) -> None:
    for secret in (ARG_SECRET, URL_SECRET, ENV_SECRET, PASTED_TOKEN):
        assert secret not in text, f"{where} leaks {secret!r}:\n{text}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ("config", "show"),
        ("config", "show", "--json"),
        ("list",),
        ("list", "--json"),
        ("show", "leaky"),
        ("show", "leaky", "--json"),
        ("test", "leaky"),
        ("test", "leaky", "--json"),
    ],
    ids=lambda argv: " ".join(argv),
)
def test_values_from_the_environment_never_print_in_args_urls_or_stderr(project: Path, argv: tuple[str, ...]) -> None:
    done = mcpmux(*argv)
    assert done.returncode == 0, done.stderr
    assert_no_secret(done.stdout, f"mcpmux {' '.join(argv)} stdout")
    assert_no_secret(done.stderr, f"mcpmux {' '.join(argv)} stderr")


def test_a_childs_stderr_is_stored_and_printed_without_its_secrets(project: Path, isolated_home: Path) -> None:
    done = mcpmux("call", "leaky:echo", json.dumps({"text": "hello"}))
    assert done.returncode == 0, done.stderr
    logs = mcpmux("logs", "leaky")
    assert logs.returncode == 0, logs.stderr
    assert "starting with token ****" in logs.stdout, logs.stdout
    assert "echo called; my key is ****" in logs.stdout, logs.stdout
    assert_no_secret(logs.stdout + logs.stderr, "mcpmux logs")
    files = list((isolated_home / "mcpmux-state").rglob("*.log*"))
    assert files, "the child's stderr log was not written"
    for path in files:
        assert_no_secret(path.read_text("utf-8", "replace"), str(path))


@pytest.mark.slow
def test_a_secret_passed_as_a_tool_argument_is_not_stored_in_the_audit_table(
    project: Path, isolated_home: Path
) -> None:
    for text in (ENV_SECRET, f"my key is {ARG_SECRET}", PASTED_TOKEN):
        done = mcpmux("call", "leaky:echo", json.dumps({"text": text}))
        assert done.returncode == 0, done.stderr
    audit = mcpmux("audit", "--json")
    assert audit.returncode == 0, audit.stderr
    assert len(json.loads(audit.stdout)) >= 3, audit.stdout
    assert_no_secret(audit.stdout, "mcpmux audit --json")
    for db in isolated_home.rglob("*.db"):
        with sqlite3.connect(db) as conn:
            tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
            for table in tables:
                for row in conn.execute(f"select * from {table}"):
                    assert_no_secret(repr(row), f"{db.name}:{table}")


class _Chunks:
    """A byte stream that hands out fixed chunks, then ends (what a child's stderr pipe looks like)."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def receive(self, max_bytes: int = 65536) -> bytes:
        import anyio

        if not self._chunks:
            raise anyio.EndOfStream
        return self._chunks.pop(0)


@pytest.mark.anyio
async def test_a_secret_split_across_two_reads_of_stderr_is_still_masked(isolated_home: Path) -> None:
    from mcpmux.transports._stderr import StderrSink

    sink = StderrSink("split", frozenset({ENV_SECRET}))
    half = len(ENV_SECRET) // 2
    chunks = [b"key=" + ENV_SECRET[:half].encode(), ENV_SECRET[half:].encode() + b"\nlast words, no newline"]
    await sink.drain(_Chunks(chunks))  # type: ignore[arg-type]
    assert sink.tail() == "key=****\nlast words, no newline"
    assert sink.path.read_text("utf-8") == "key=****\nlast words, no newline"


@pytest.mark.slow
@pytest.mark.timeout(600)  # seven CLI runs of up to 120 s each (their own bound), beside a real upstream
def test_a_reachable_servers_url_secret_never_prints_in_test_doctor_or_a_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``test`` printed the target and ``doctor`` a connect error with the URL's secret (only an
    unreachable server was tried before); a tool that echoes a secret value has it masked too."""
    tiny = Path(__file__).parents[1] / "fixtures" / "tiny_server.py"
    upstream = tmp_path / "upstream.json"
    server = {"name": "tiny", "type": "stdio", "command": sys.executable, "args": ["-S", "-E", str(tiny)]}
    upstream.write_text(json.dumps({"mcp": {"servers": [server], "security": {"pinning": "off"}}}))
    with serve(tmp_path / "gateway", upstream, "--http", "127.0.0.1:0", "--no-ui", "--no-api") as gateway:
        project = tmp_path / "project"
        project.mkdir()
        (project / "mcpmux.yaml").write_text(
            f'mcp:\n  servers:\n    - {{name: remote, type: http, url: "{gateway.url}?key=${{PLAIN_URL}}",'
            ' headers: {X-Key: "${PLAIN_URL}"}}\n  security: {pinning: "off"}\n',
            encoding="utf-8",
        )
        monkeypatch.chdir(project)
        monkeypatch.setenv("PLAIN_URL", URL_SECRET)
        for argv in (
            ("test", "remote"),
            ("test", "remote", "--json"),
            ("doctor",),
            ("doctor", "--json"),
            ("tools", "remote"),
            ("call", "remote:tiny__echo", f"text=mine is {URL_SECRET}"),
        ):
            done = mcpmux(*argv)
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
            assert_no_secret(done.stdout + done.stderr, f"mcpmux {' '.join(argv)}")
        shown = mcpmux("config", "show", "--show-secrets")  # the one place asked to show them
        assert URL_SECRET in shown.stdout
