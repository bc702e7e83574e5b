"""A warm call of inputs the daemon knows loads no configuration models, and every input change is seen.

The daemon keeps an attach under the digest of the command's configuration inputs
(:mod:`mcpmux.daemon.known`); a later command with the same digest sends only the digest. Checked
from outside with real processes: what a warm call imports, and that a changed file, a changed
variable, a file appearing and a stopped instance each send the command back to its configuration
(deny rules written a moment ago hold at once).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.daemon.conftest import Daemon, cli
from tests.daemon.test_daemon_lifecycle import _counter, _gone, _write_config

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.timeout(600)]

WAIT_S = 120.0
HEAVY = ("pydantic", "mcpmux.config.models", "mcp.client.session", "mcpmux.manager", "mcpmux.policy.guard")
PROBE = """
import sys
from mcpmux.cli.main import run
code = run(sys.argv[1:])
sys.stdout.flush()
heavy = [m for m in {heavy!r} if m in sys.modules]
sys.stderr.write("LOADED " + ",".join(heavy) + "\\n")
sys.exit(code)
"""


def _probe(daemon: Daemon, cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, list[str]]:
    """``mcpmux ARGS`` in a fresh process: exit code, stdout, and which heavy modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], env=env or daemon.env, cwd=cwd,
        capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    loaded = next((line for line in done.stderr.splitlines() if line.startswith("LOADED ")), None)
    assert loaded is not None, done.stderr[-2000:]
    return done.returncode, done.stdout, [m for m in loaded.removeprefix("LOADED ").split(",") if m]


def _pid(out: str) -> int:
    return int(json.loads(out)["content"][0]["text"].partition(" pid ")[2])


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_second_warm_call_loads_no_configuration_and_prints_the_same(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    daemon.start("--linger", "600")
    first = _probe(daemon, project, "--json", "call", "counter:bump")  # loads the configuration: kept
    assert first[0] == 0 and "pydantic" in first[2]
    second = _probe(daemon, project, "--json", "call", "counter:bump")
    assert second[0] == 0 and second[2] == ["pydantic"]  # --json prints through the SDK's result model
    assert _pid(second[1]) == _pid(first[1])  # the same warm instance
    text = _probe(daemon, project, "call", "counter:bump")
    assert (text[0], text[1].strip().partition(" pid ")[0], text[2]) == (0, "3", [])
    code, out, _ = cli("--no-daemon", "call", "counter:bump")
    assert (code, out.strip().partition(" pid ")[0]) == (0, "1")  # the ordinary path prints the same way


def test_a_deny_rule_written_a_moment_ago_holds_at_once(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    daemon.start("--linger", "600")
    for _ in range(2):
        assert _probe(daemon, project, "call", "counter:bump")[0] == 0
    mcp = json.loads((project / "mcpmux.yaml").read_text())
    mcp["mcp"]["security"] = {"deny": ["counter:bump"]}
    (project / "mcpmux.yaml").write_text(json.dumps(mcp), encoding="utf-8")
    code, out, _ = _probe(daemon, project, "call", "counter:bump")
    direct = cli("--no-daemon", "call", "counter:bump")
    assert (code, out) == direct[:2] and code != 0


def test_a_changed_variable_and_a_config_file_appearing_are_new_inputs(daemon: Daemon, project: Path) -> None:
    home = Path(daemon.env["HOME"])
    user = home / ".config" / "mcpmux" / "config.yaml"
    user.parent.mkdir(parents=True, exist_ok=True)
    entry = {**_counter("counter"), "env": {"COUNTER_TAG": "${COUNTER_TAG}"}}
    user.write_text(json.dumps({"mcp": {"servers": [entry], "settings": {"connect_timeout_ms": 120_000}}}))
    env = {**daemon.env, "XDG_CONFIG_HOME": str(home / ".config"), "COUNTER_TAG": "one"}
    daemon.start("--linger", "600")
    _probe(daemon, project, "--json", "call", "counter:bump", env=env)
    code, out, loaded = _probe(daemon, project, "--json", "call", "counter:bump", env=env)
    assert code == 0 and "mcpmux.config.models" not in loaded
    one = _pid(out)
    code, out, loaded = _probe(daemon, project, "--json", "call", "counter:bump", env={**env, "COUNTER_TAG": "two"})
    assert code == 0 and "mcpmux.config.models" in loaded  # another input: the configuration loaded again
    assert _pid(out) != one  # the entry resolved with the new value: its own instance
    (project / "mcpmux.yaml").write_text(json.dumps({"mcp": {"security": {"deny": ["counter:*"]}}}))
    code, _, loaded = _probe(daemon, project, "call", "counter:bump", env=env)
    assert code != 0 and "mcpmux.config.models" in loaded  # the project file's rule holds


def test_a_stopped_instance_is_started_again_by_the_command_that_loads_its_configuration(
    daemon: Daemon, project: Path
) -> None:
    _write_config(project, _counter("counter", idle_timeout_s=1.0))
    daemon.start("--linger", "600")
    first = _probe(daemon, project, "--json", "call", "counter:bump")
    daemon.wait_for(lambda: "counter" not in daemon.server_pids(), "the idle instance to stop", WAIT_S)
    daemon.wait_for(lambda: _gone(_pid(first[1])), "its process to exit", WAIT_S)
    code, out, loaded = _probe(daemon, project, "--json", "call", "counter:bump")
    assert code == 0 and "mcpmux.config.models" in loaded
    assert json.loads(out)["content"][0]["text"].startswith("1 pid ")


def test_the_no_daemon_switch_and_an_env_file_keep_the_command_on_its_own_inputs(daemon: Daemon, project: Path) -> None:
    _write_config(project, _counter("counter"))
    daemon.start("--linger", "600")
    for _ in range(2):
        assert _probe(daemon, project, "call", "counter:bump")[0] == 0
    code, out, loaded = _probe(daemon, project, "--no-daemon", "call", "counter:bump")
    assert (code, out.startswith("1 pid "), "mcpmux.manager" in loaded) == (0, True, True)
    text = (project / "mcpmux.yaml").read_text()
    (project / "mcpmux.yaml").write_text("# an envFile would be read too\n" + text)
    for _ in range(2):  # a file the digest does not read might matter: the configuration is loaded each time
        code, _, loaded = _probe(daemon, project, "call", "counter:bump")
        assert code == 0 and "mcpmux.config.models" in loaded
