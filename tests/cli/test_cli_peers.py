"""The installed ``mcpmux`` console script against real servers: output, JSON, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.forkserver import MCPMUX
from tests.peers.fixtures import stdio_command

pytestmark = [pytest.mark.peers, pytest.mark.subprocess]


def _entry(name: str, peer: str, *extra: str) -> str:
    command, args = stdio_command(peer)
    fields = f"name: {name}, type: stdio, command: {json.dumps(command)}, args: {json.dumps(args)}{''.join(extra)}"
    return f"    - {{{fields}}}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PEER_SECRET", "s3cr3t-value-for-test")
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  settings: {connect_timeout_ms: 20000}\n  servers:\n"
        + _entry("time", "time", ", env: {TOKEN: '${PEER_SECRET}'}")
        + _entry("everything", "everything")
        + "    - {name: broken, type: stdio, command: not-installed-anywhere-mcp}\n"
        + "    - {name: crashing, type: stdio, command: sh,"
        " args: ['-c', 'echo boom on stderr >&2; exit 3', '${PEER_SECRET}'], retry_attempts: 0}\n",
        encoding="utf-8",
    )
    return tmp_path


def mcpmux(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPMUX, *args], capture_output=True, text=True, timeout=timeout, env=os.environ, check=False)


@pytest.mark.slow
def test_call_prints_the_result_and_exits_0(project: Path) -> None:
    run = mcpmux("call", "time:get_current_time", '{"timezone": "UTC"}')
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["timezone"] == "UTC"


@pytest.mark.slow
def test_call_json_is_the_wire_result(project: Path) -> None:
    run = mcpmux("call", "everything:get-sum", '{"a": 2, "b": 3}', "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["content"][0]["text"].endswith("5.")


@pytest.mark.slow
def test_a_tool_reporting_an_error_exits_1(project: Path) -> None:
    run = mcpmux("call", "time:get_current_time", '{"timezone": "Not/AZone"}')
    assert run.returncode == 1
    assert "Invalid timezone" in run.stdout and "reported an error" in run.stderr


@pytest.mark.slow
def test_a_timeout_exits_3_with_a_hint(project: Path) -> None:
    run = mcpmux("call", "everything:trigger-long-running-operation", '{"duration": 5, "steps": 5}', "--timeout", "0.5")
    assert run.returncode == 3
    assert "timed out after 0.5 s" in run.stderr and "hint:" in run.stderr


@pytest.mark.slow
def test_an_unreachable_server_exits_3_with_its_evidence(project: Path) -> None:
    run = mcpmux("test", "broken")
    assert run.returncode == 3
    assert run.stderr.startswith("Error: server 'broken': command 'not-installed-anywhere-mcp' not found on PATH")
    crashed = mcpmux("call", "crashing:anything")
    assert crashed.returncode == 3
    assert "boom on stderr" in crashed.stderr


@pytest.mark.slow
def test_an_unknown_tool_is_a_usage_error_with_suggestions(project: Path) -> None:
    run = mcpmux("call", "time:get_curent_time")
    assert run.returncode == 2
    assert "did you mean 'time:get_current_time'" in run.stderr


def test_bad_arguments_are_a_usage_error(project: Path) -> None:
    assert mcpmux("call", "time:get_current_time", "{not json").returncode == 2
    assert mcpmux("call", "time:get_current_time", "[1, 2]").returncode == 2
    assert mcpmux("tools", "no-such-server").returncode == 2


@pytest.mark.slow
def test_test_reports_protocol_counts_and_timings(project: Path) -> None:
    run = mcpmux("test", "everything", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["protocol_version"] == "2025-11-25"
    assert report["counts"]["resources"] >= 7 and report["counts"]["prompts"] >= 4
    assert report["timings_ms"]["connect"] > 0


@pytest.mark.slow
def test_list_reports_every_server_with_state_and_reason(project: Path) -> None:
    run = mcpmux("list", "--json")
    assert run.returncode == 0, run.stderr
    assert "s3cr3t-value-for-test" not in run.stdout
    rows = {r["name"]: r for r in json.loads(run.stdout)}
    assert rows["crashing"]["target"].endswith("****")
    assert rows["time"]["state"] == "connected" and rows["time"]["tools"] == 2
    assert rows["broken"]["state"] == "failed" and "not found on PATH" in rows["broken"]["reason"]
    assert rows["crashing"]["state"] == "failed" and "boom on stderr" in rows["crashing"]["reason"]


@pytest.mark.slow
def test_tools_resources_prompts_read_and_prompt(project: Path) -> None:
    tools = json.loads(mcpmux("tools", "everything", "--json").stdout)
    assert {"everything:echo", "everything:read_resource", "everything:get_prompt"} <= {t["name"] for t in tools}
    resources = json.loads(mcpmux("resources", "everything", "--json").stdout)
    assert any(r["template"] for r in resources)
    read = mcpmux("read", "everything", "demo://resource/dynamic/text/7")
    assert read.returncode == 0 and "7" in read.stdout
    prompt = mcpmux("prompt", "everything:args-prompt", '{"city": "Lisbon"}')
    assert prompt.returncode == 0 and "Lisbon" in prompt.stdout


@pytest.mark.slow
def test_show_masks_secrets_and_lists_the_child_environment(project: Path) -> None:
    run = mcpmux("show", "time", "--json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert "s3cr3t-value-for-test" not in run.stdout
    assert data["environment"]["TOKEN"] == "****" and "PEER_SECRET" not in data["environment"]
    assert data["status"]["state"] == "connected" and data["tools"] == ["time:get_current_time", "time:convert_time"]


@pytest.mark.slow
def test_logs_show_a_servers_stderr(project: Path) -> None:
    mcpmux("test", "crashing")
    run = mcpmux("logs", "crashing")
    assert run.returncode == 0 and "boom on stderr" in run.stdout


@pytest.mark.slow
def test_refresh_fills_the_catalog_that_lazy_servers_are_listed_from(project: Path) -> None:
    config = project / "mcpmux.yaml"
    config.write_text(config.read_text().replace("  settings: {", "  settings: {lazy: true, "), encoding="utf-8")
    refreshed = mcpmux("refresh", "time")
    assert refreshed.returncode == 0 and "time: 2 tools" in refreshed.stdout
    listed = json.loads(mcpmux("list", "--json").stdout)
    time_row = next(r for r in listed if r["name"] == "time")
    assert (time_row["state"], time_row["pid"], time_row["tools"]) == ("configured", None, 2)


@pytest.mark.slow
def test_secrets_never_reach_the_logs_even_verbose(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("API_TOKEN", "tok-9f8e7d6c5b4a3210")
    (tmp_path / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n"
        "    - {name: api, type: http, url: 'http://127.0.0.1:9/mcp?key=${API_TOKEN}', retry_attempts: 0}\n",
        encoding="utf-8",
    )
    run = mcpmux("-vv", "list")
    assert "cannot connect" in run.stderr or "api" in run.stdout
    assert "tok-9f8e7d6c5b4a3210" not in run.stderr + run.stdout
