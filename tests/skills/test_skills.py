"""Agent skills through mcpmux: `mcpmux skills`, `mcpmux skill`, the host's guard, a lying server.

A real child (tests/skills/skills_server.py, the official SDK's extension API over stdio, on the
2026-07-28 wire: SDK 2.x servers advertise extensions only there) behind the real CLI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.gateway.serving import mcpmux

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

SERVER = Path(__file__).with_name("skills_server.py")
SKILL = "skill://acme/pdf-processing/SKILL.md"
FORMS = "skill://acme/pdf-processing/references/FORMS.md"


def config(root: Path, tamper: str | None = None, **security: object) -> Path:
    server: dict[str, object] = {
        "name": "acme", "type": "stdio", "command": sys.executable, "args": [str(SERVER)], "protocol": "2026-07-28",
    }  # fmt: skip
    if tamper is not None:
        server["env"] = {"SKILLS_TAMPER": tamper}
    path = root / f"mcpmux-{tamper}.json"
    path.write_text(json.dumps({"mcp": {"servers": [server], "security": {"pinning": "off", **security}}}))
    return path


def reads(root: Path, conf: Path) -> list[tuple[str, str, str]]:
    rows = json.loads(mcpmux(root, conf, "audit", "--json", timeout_s=180).stdout)
    return [(r["args"]["uri"], r["decision"], r["outcome"]) for r in rows if r["tool"] == "read_resource"]


def test_skills_are_listed_without_reading_a_file_and_loaded_with_every_file_checked(tmp_path: Path) -> None:
    conf = config(tmp_path)
    listed = mcpmux(tmp_path, conf, "--json", "skills", timeout_s=180)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {"server": "acme", "name": "pdf-processing", "uri": SKILL, "files": 2,
         "description": "Extract, fill and assemble PDF documents"},
    ]  # fmt: skip
    assert reads(tmp_path, conf) == []  # listing read no file (no prefetch)
    table = mcpmux(tmp_path, conf, "skills", "acme", timeout_s=180)
    assert "pdf-processing" in table.stdout and "Extract, fill" in table.stdout
    shown = mcpmux(tmp_path, conf, "skill", "acme", "pdf-processing", timeout_s=180)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("---\nname: pdf-processing") and "Use forms." in shown.stdout
    assert f"{FORMS} (27 characters, verified)" in shown.stderr
    loaded = json.loads(mcpmux(tmp_path, conf, "--json", "skill", "acme", SKILL, timeout_s=180).stdout)
    assert loaded["files"] == {FORMS: "# Forms\n\nFill every field.\n"} and loaded["name"] == "pdf-processing"
    # Each file read went through the guard, allowed and audited, SKILL.md first.
    assert reads(tmp_path, conf)[:2] in ([(SKILL, "allowed", "ok"), (FORMS, "allowed", "ok")],
                                         [(FORMS, "allowed", "ok"), (SKILL, "allowed", "ok")])  # fmt: skip
    missing = mcpmux(tmp_path, conf, "skill", "acme", "pdf-procesing", timeout_s=180)
    assert missing.returncode == 2 and "did you mean 'pdf-processing'" in missing.stderr


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("digest", "bytes, its entry says 113"),
        ("frontmatter", "frontmatter differs from the listed one in: description"),
    ],
)
def test_a_server_that_serves_another_skill_than_it_lists_is_refused_and_the_rest_is_not_read(
    tmp_path: Path, tamper: str, reason: str
) -> None:
    conf = config(tmp_path, tamper)
    refused = mcpmux(tmp_path, conf, "skill", "acme", "pdf-processing", timeout_s=180)
    assert refused.returncode == 3, refused.stderr
    assert refused.stdout == ""  # nothing of the tampered skill is shown
    assert f"skill {SKILL} was not loaded" in refused.stderr and reason in refused.stderr
    assert [uri for uri, _, _ in reads(tmp_path, conf)] == [SKILL]  # FORMS.md never read


def test_a_deny_rule_on_read_resource_keeps_a_skill_from_loading(tmp_path: Path) -> None:
    conf = config(tmp_path, None, denied_tools=["acme:read_resource"])
    denied = mcpmux(tmp_path, conf, "skill", "acme", "pdf-processing", timeout_s=180)
    assert denied.returncode != 0 and "denied" in denied.stderr.lower(), denied.stderr
    assert mcpmux(tmp_path, conf, "skills", timeout_s=180).returncode == 0  # listing is not reading
