"""Editing our YAML in place: comments, order and formatting survive byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mcpmux.config.edit import SKELETON, ConfigDocument, merge_edit, secret_warnings
from mcpmux.config.loader import load_file
from mcpmux.errors import ConfigError

README = Path(__file__).parents[2] / "README.md"

COMMENTED = """\
# top comment
mcp:
  # servers below
  servers:
    # heading of a
    - name: a   # eol name a
      type: stdio
      command: x   # eol a

    # heading of b
    - name: b
      command: y
      env:
        K: v  # eol b
  # trailing before settings

  settings: {timeout_ms: 1000}   # eol settings
llm:
  provider: openai
"""

FILES = {
    "readme": re.search(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL).group(1),  # type: ignore[union-attr]
    "commented": COMMENTED,
    "flow-entries": (
        "mcp:\n  servers:\n    - {name: t, type: stdio, command: x}   # t\n    - {name: b, command: y}\n# end\n"
    ),
    "mapping-form": (
        "mcp:\n  servers:\n    a:   # a\n      command: x\n    # about b\n    b:\n      command: y\n  # after\n"
    ),
    "compact-indent": "mcp:\n  servers:\n  - name: a\n    command: x\n  # tail\nllm: {}\n",
    "four-spaces": "mcp:\n    servers:\n        -   name: a\n            command: x\n    # tail\n",
    "skeleton": SKELETON,
    "bom": "\ufeffmcp:\n  servers:\n    - name: a\n      command: x\n",
    "crlf": "mcp:\r\n  servers:\r\n    - name: a   # a\r\n      command: x\r\n  # tail\r\n",
}
ENV = {"T": "t", "GITHUB_TOKEN": "g", "OPENAI_API_KEY": "k"}
NEW = {"name": "new", "type": "stdio", "command": "npx", "args": ["-y", "pkg"], "env": {"T": "${T}"}}


def _edit(path: Path, action: str, *args: object) -> str:
    document = ConfigDocument(path)
    getattr(document, action)(*args)
    document.save()
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("name", sorted(FILES))
def test_add_then_remove_gives_back_the_identical_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_bytes(FILES[name].encode())
    added = _edit(path, "add", NEW)
    assert "new" in [s.name for s in load_file(path, environ=ENV).servers]
    assert "${T}" in added
    _edit(path, "remove", "new")
    assert path.read_bytes() == FILES[name].encode()


@pytest.mark.parametrize("name", sorted(set(FILES) - {"skeleton"}))
def test_disable_then_enable_gives_back_the_identical_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_bytes(FILES[name].encode())
    first = ConfigDocument(path).names()
    _edit(path, "set_enabled", first[0], False)
    assert not load_file(path, environ=ENV).servers[0].enabled
    _edit(path, "set_enabled", first[0], True)
    assert path.read_bytes() == FILES[name].encode()


def test_the_comment_block_after_the_last_entry_survives_its_removal(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    text = _edit(path, "remove", "b")
    assert "  # trailing before settings\n\n  settings: {timeout_ms: 1000}   # eol settings\n" in text
    assert "# heading of b" not in text and "eol b" not in text
    assert text.startswith("# top comment\nmcp:\n  # servers below\n  servers:\n    # heading of a\n")


def test_removing_the_first_entry_keeps_the_comments_of_the_next(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    text = _edit(path, "remove", "a")
    assert "heading of a" not in text and "eol a" not in text
    assert "  servers:\n    # heading of b\n    - name: b\n" in text
    assert "  # trailing before settings\n" in text


def test_removing_the_first_entry_keeps_a_section_comment_above_it(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED.replace("    # heading of a\n", "    # --- section ---\n\n    # heading of a\n"))
    text = _edit(path, "remove", "a")
    assert "  servers:\n    # --- section ---\n\n    # heading of b\n    - name: b\n" in text


def test_removing_the_only_entry_leaves_the_skeleton_and_the_comments(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(
        "mcp:\n  servers:\n    - name: a\n      command: x\n  # keep me\n  settings: {}\n", encoding="utf-8"
    )
    assert _edit(path, "remove", "a") == "mcp:\n  servers:\n  # keep me\n  settings: {}\n"


def test_rename_changes_only_the_name(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    assert _edit(path, "rename", "a", "alpha") == COMMENTED.replace("- name: a ", "- name: alpha ")
    path.write_text(FILES["mapping-form"], encoding="utf-8")
    assert _edit(path, "rename", "a", "alpha") == FILES["mapping-form"].replace("    a:", "    alpha:")


def test_a_missing_file_is_created_from_the_skeleton(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mcpmux.yaml"
    text = _edit(path, "add", {"name": "w", "type": "http", "url": "https://h/mcp", "headers": {"A": "b"}})
    assert (
        text == "mcp:\n  servers:\n    - name: w\n      type: http\n      url: https://h/mcp\n      headers: {A: b}\n"
    )


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"name": "a", "command": "z"}, "already exists"),
        ({"name": "Bad Name", "command": "z"}, "illegal server name"),
    ],
)
def test_duplicate_and_illegal_names_are_refused(tmp_path: Path, entry: dict[str, str], reason: str) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    with pytest.raises(ConfigError, match=reason) as caught:
        ConfigDocument(path).add(entry)
    assert caught.value.hint


def test_an_edit_that_would_be_invalid_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    document = ConfigDocument(path)
    document.add({"name": "bad", "type": "http", "url": "ftp://nope"})
    with pytest.raises(ConfigError, match="must start with"):
        document.save()
    assert path.read_text(encoding="utf-8") == COMMENTED
    assert [p.name for p in tmp_path.iterdir()] == ["mcpmux.yaml"]


def test_unset_references_do_not_fail_validation_and_stay_references(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    text = _edit(path, "add", {"name": "g", "command": "npx", "env": {"TOKEN": "${NOT_SET_ANYWHERE}"}})
    assert "env: {TOKEN: '${NOT_SET_ANYWHERE}'}" in text


def test_a_file_of_another_format_is_not_edited(tmp_path: Path) -> None:
    path = tmp_path / "other.yaml"
    path.write_text("servers: [{name: a, command: x}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not an mcpmux YAML file"):
        ConfigDocument(path)
    with pytest.raises(ConfigError, match="edit this JSON by hand"):
        ConfigDocument(tmp_path / "mcpmux.json")


def test_merge_takes_only_the_changed_lines() -> None:
    original = "a:   1\nlong: {x: 1,\n  y: 2}\nb: 2\n"
    base = "a:   1\nlong: {x: 1, y: 2}\nb: 2\n"
    edited = "a:   1\nlong: {x: 1, y: 2}\nb: 3\n"
    assert merge_edit(original, base, edited) == "a:   1\nlong: {x: 1,\n  y: 2}\nb: 3\n"


def test_literal_secrets_are_warned_about_and_references_are_not() -> None:
    entry = {
        "name": "github",
        "env": {"GITHUB_TOKEN": "ghp_abcdefghijklmnop1234", "LOG": "info", "REF": "${X}"},
        "headers": {"Authorization": "Bearer sk-proj-abcdefgh12345678", "Accept": "application/json"},
    }
    warnings = secret_warnings(entry)
    assert len(warnings) == 2
    assert "--env 'GITHUB_TOKEN=${GITHUB_TOKEN}'" in warnings[0]
    assert "'Authorization: Bearer ${GITHUB_TOKEN}'" in warnings[1]
    assert secret_warnings({"name": "x", "env": {"SEED": "aZ8kq2LmP0xW7vB3nR5tY9uQ"}})
