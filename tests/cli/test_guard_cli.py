"""The guard through the CLI: quarantine, approve, pins, audit, and approval in a real terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.forkserver import MCPMUX

pytestmark = [pytest.mark.slow, pytest.mark.subprocess, pytest.mark.timeout(600)]

CHANGING = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")
WAIT_S = 120  # bounds for a loaded 2-core machine, not timings: one `tools` took over 60 s under load once


def write_config(project: Path, variant: str) -> None:
    (project / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n"
        f"    - name: ch\n      type: stdio\n      command: {json.dumps(sys.executable)}\n"
        f"      args: [{json.dumps(CHANGING)}]\n      env: {{TOOLS_VARIANT: {variant}}}\n",
        encoding="utf-8",
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, "base")
    return tmp_path


def mcpmux(*args: str) -> subprocess.CompletedProcess[str]:
    options = {"capture_output": True, "text": True, "timeout": WAIT_S, "env": os.environ, "check": False}
    return subprocess.run([MCPMUX, *args], stdin=subprocess.DEVNULL, **options)


def tool_names(*args: str) -> list[str]:
    return [t["name"] for t in json.loads(mcpmux("tools", *args, "--json").stdout)]


def test_a_changed_definition_is_withheld_until_approved(project: Path) -> None:
    assert "ch:read_notes" in tool_names("ch")
    write_config(project, "description")
    assert "ch:read_notes" not in tool_names("ch")
    refused = mcpmux("call", "ch:read_notes", '{"path": "a"}')
    assert refused.returncode == 1
    assert "quarantined: its definition changed" in refused.stderr and '+  "description"' in refused.stderr
    pins = {p["tool"]: p for p in json.loads(mcpmux("pins", "--json").stdout)}
    assert pins["read_notes"]["state"] == "changed" and pins["delete_notes"]["state"] == "approved"
    approved = mcpmux("approve", "ch:read_notes")
    assert approved.returncode == 0 and "approved ch:read_notes" in approved.stdout
    assert mcpmux("call", "ch:read_notes", '{"path": "a"}').stdout.strip() == "notes of a"


def test_without_a_terminal_a_destructive_call_is_refused_and_audited(project: Path) -> None:
    run = mcpmux("call", "ch:delete_notes", '{"path": "a"}')
    assert run.returncode == 1
    assert "not approved" in run.stderr and "hint: run the command in a terminal" in run.stderr
    mcpmux("call", "ch:read_notes", '{"path": "b"}')
    rows = json.loads(mcpmux("audit", "--json", "--since", "1h").stdout)
    assert [(r["tool"], r["decision"], r["outcome"]) for r in rows] == [
        ("read_notes", "allowed", "ok"),
        ("delete_notes", "denied", "refused"),
    ]
    assert all(r["face"] == "cli" for r in rows)
    assert json.loads(mcpmux("audit", "--json", "--tool", "delete_notes").stdout)[0]["args"] == {"path": "a"}


@pytest.mark.parametrize(("answer", "expected"), [("y", "deleted a"), ("n", "was not approved")])
def test_a_terminal_user_is_asked_before_a_destructive_call(project: Path, answer: str, expected: str) -> None:
    child = pexpect.spawn(MCPMUX, ["call", "ch:delete_notes", '{"path": "a"}'], env=dict(os.environ), timeout=WAIT_S)
    try:
        child.expect("approval needed for ch:delete_notes")
        child.expect(r"Allow\? \[y\]es")
        child.sendline(answer)
        child.expect(expected)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == (0 if answer == "y" else 1)


def test_always_for_this_tool_is_remembered_for_the_project(project: Path) -> None:
    child = pexpect.spawn(MCPMUX, ["call", "ch:delete_notes", '{"path": "a"}'], env=dict(os.environ), timeout=WAIT_S)
    try:
        child.expect(r"Allow\?")
        child.sendline("t")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    # Remembered: no terminal needed any more in this project.
    assert mcpmux("call", "ch:delete_notes", '{"path": "b"}').stdout.strip() == "deleted b"


def test_always_approvals_are_listed_and_revoked(project: Path) -> None:
    child = pexpect.spawn(MCPMUX, ["call", "ch:delete_notes", '{"path": "a"}'], env=dict(os.environ), timeout=WAIT_S)
    try:
        child.expect(r"Allow\?")
        child.sendline("s")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    listed = json.loads(mcpmux("approvals", "list", "--json").stdout)
    assert [(a["server"], a["tool"], a["face"], a["caller"], a["project"]) for a in listed] == [
        ("ch", "*", "local", "", str(project.resolve()))
    ]
    assert "ch (every tool)" in mcpmux("approvals", "list").stdout
    assert mcpmux("call", "ch:delete_notes", '{"path": "b"}').returncode == 0
    nothing = mcpmux("approvals", "revoke", "other")
    assert nothing.returncode == 2 and "no standing approval matches other" in nothing.stderr
    revoked = mcpmux("approvals", "revoke", "ch", "--json")
    assert revoked.returncode == 0 and json.loads(revoked.stdout) == {"revoked": 1}
    assert json.loads(mcpmux("approvals", "list", "--json").stdout) == []
    assert mcpmux("call", "ch:delete_notes", '{"path": "c"}').returncode == 1  # asked again: no terminal, refused


def test_scan_reports_a_poisoned_description_and_exits_1(project: Path) -> None:
    write_config(project, "poisoned")
    run = mcpmux("scan", "--json")
    assert run.returncode == 1
    findings = json.loads(run.stdout)
    assert {f["rule"] for f in findings} >= {"markup", "concealment", "sensitive-path"}
    assert all(f["tool"] == "read_notes" and f["severity"] == "high" for f in findings)


def test_scan_of_a_clean_server_finds_nothing(project: Path) -> None:
    run = mcpmux("scan", "ch")
    assert (run.returncode, run.stdout.strip()) == (0, "no findings")


def test_with_an_empty_prefix_the_hints_name_the_command_and_the_rule_that_work(project: Path) -> None:
    def configure(variant: str, extra: str = "") -> None:
        write_config(project, variant)
        text = (
            (project / "mcpmux.yaml")
            .read_text(encoding="utf-8")
            .replace("    - name: ch\n", "    - name: ch\n      prefix: ''\n")
        )
        (project / "mcpmux.yaml").write_text(text + extra, encoding="utf-8")

    configure("base")
    assert "read_notes" in tool_names("ch")
    configure("description")
    refused = mcpmux("call", "read_notes", '{"path": "a"}')
    assert refused.returncode == 1 and "hint: review it with `mcpmux pins`, then approve it with" in refused.stderr
    command = refused.stderr.split("approve it with `", 1)[1].split("`", 1)[0]
    assert command == "mcpmux approve ch:read_notes"
    assert mcpmux(*command.split()[1:]).returncode == 0
    assert mcpmux("call", "read_notes", '{"path": "a"}').stdout.strip() == "notes of a"

    asked = mcpmux("call", "delete_notes", '{"path": "a"}')
    assert asked.returncode == 1 and "require_approval: false" not in asked.stderr
    rule = "security.approval_rules [{tools: 'delete_notes', action: allow}]"
    assert rule in asked.stderr
    configure("description", "  security:\n    approval_rules: [{tools: 'delete_notes', action: allow}]\n")
    assert mcpmux("call", "delete_notes", '{"path": "a"}').stdout.strip() == "deleted a"


def test_approving_a_definition_the_scanner_flagged_high_asks_first(project: Path) -> None:
    write_config(project, "poisoned")
    assert "ch:read_notes" not in tool_names("ch")  # quarantined on first sight
    scripted = mcpmux("approve", "ch:read_notes")
    assert scripted.returncode == 1 and "no one was asked" in scripted.stderr
    assert "[sensitive-path]" in scripted.stderr and "approve ch:read_notes --yes" in scripted.stderr
    assert "ch:read_notes" not in tool_names("ch")
    child = pexpect.spawn(MCPMUX, ["approve", "ch:read_notes"], env=dict(os.environ), timeout=WAIT_S)
    try:
        child.expect("the scanner flagged what you are approving")
        child.expect(r"Approve anyway\? \[y/N\]")
        child.sendline("n")
        child.expect("declined")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1 and "ch:read_notes" not in tool_names("ch")
    forced = mcpmux("approve", "ch:read_notes", "--yes")
    assert forced.returncode == 0 and "approved ch:read_notes" in forced.stdout
    assert "ch:read_notes" in tool_names("ch")
