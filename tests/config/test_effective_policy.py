"""``config show`` says what the guard actually asks and withholds, not only the raw settings."""

from __future__ import annotations

from pathlib import Path

from mcpmux.config import config_to_dict, load_file


def effective(tmp_path: Path, security: str) -> dict[str, object]:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(f"mcp:\n  servers: []\n  security: {security}\n", encoding="utf-8")
    shown = config_to_dict(load_file(path, environ={}))["mcp"]["security"]
    assert isinstance(shown, dict)
    return dict(shown["effective"])


def test_by_default_destructive_tools_still_ask_though_require_approval_reads_false(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text("mcp:\n  servers: []\n", encoding="utf-8")
    security = config_to_dict(load_file(path, environ={}))["mcp"]["security"]
    assert security["require_approval"] is False
    assert any("destructiveHint" in line for line in security["effective"]["asks"])


def test_an_explicit_false_asks_nothing(tmp_path: Path) -> None:
    assert effective(tmp_path, "{require_approval: false}")["asks"] == ["nothing: every allowed call runs"]


def test_patterns_rules_and_lists_are_spelled_out(tmp_path: Path) -> None:
    shown = effective(
        tmp_path,
        "{require_approval: ['fs:write_*'], denied_tools: ['fs:rm'], allowed_tools: ['fs:*'], pinning: strict,"
        " approval_rules: [{tools: 'fs:*', action: allow}]}",
    )
    assert shown["asks"] == [
        "first, 1 approval_rules decide by tool and arguments",
        "calls of tools matching fs:write_*",
        "calls of tools annotated destructiveHint (set require_approval: false to stop)",
    ]
    assert shown["withholds"] == ["tools matching fs:rm", "every tool not matching fs:*"]
    assert shown["pins"] == "nothing until approved"
