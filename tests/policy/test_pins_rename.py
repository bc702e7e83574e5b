"""Rename-aware pins: renames, tools added to a pinned server, and changes only in invisible characters.

Each case runs the changing fixture server as a real child process: a first run pins it, a second
run (another variant of the same server) or a mid-session ``add_tool`` changes what it lists.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text

from mcpmux.config.models import Config, SecurityConfig, Settings, StdioServerConfig
from mcpmux.errors import ToolDefinitionChanged, ToolQuarantined
from mcpmux.manager import Manager
from mcpmux.policy import Guard, StateStore
from mcpmux.policy.lookalikes import invisible_change, rename_source, reveal, visible_form
from tests.forkserver import MCPMUX

pytestmark = pytest.mark.anyio

CHANGING = str(Path(__file__).parents[1] / "fixtures" / "changing_server.py")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.db") as db:
        yield db


def changing(variant: str, pinning: str = "tofu") -> Config:
    server = StdioServerConfig(name="ch", command=sys.executable, args=(CHANGING,), env={"TOOLS_VARIANT": variant})
    security = SecurityConfig(pinning=pinning)  # type: ignore[arg-type]
    return Config(servers=(server,), settings=Settings(connect_timeout_ms=20_000), security=security)


async def pin_base_then(store: StateStore, variant: str) -> tuple[list[str], dict[str, str]]:
    """Pin the base server, restart it as ``variant``; return what is listed and why the rest is held."""
    async with Manager(changing("base"), catalog=False) as manager:
        assert sorted(t.tool for t in Guard(manager, store=store).tools()) == ["add_tool", "delete_notes", "read_notes"]
    async with Manager(changing(variant), catalog=False) as manager:
        guard = Guard(manager, store=store)
        return sorted(t.tool for t in guard.tools()), {e.tool.tool: e.reason for e in guard.withheld()}


# -- the analysis, in memory ---------------------------------------------------------------


def test_invisible_change_names_each_code_point_the_definition_gained() -> None:
    before = {"name": "read", "description": "Read the file."}
    after = {"name": "read", "description": "Read\u200b the \u202efile."}
    reason = invisible_change(before, after)
    assert reason == "changed only in invisible characters: U+200B ZERO WIDTH SPACE, U+202E RIGHT-TO-LEFT OVERRIDE"
    assert reveal(after["description"]) == "Read<U+200B ZERO WIDTH SPACE> the <U+202E RIGHT-TO-LEFT OVERRIDE>file."


def test_tag_characters_are_invisible_and_shown_as_the_ascii_they_smuggle() -> None:
    smuggled = "Read." + "".join(chr(0xE0000 + ord(c)) for c in "go")
    assert visible_form(smuggled) == "Read."
    assert reveal(smuggled) == "Read.<U+E0067 TAG 'g'><U+E006F TAG 'o'>"


def test_a_look_alike_change_is_named_and_a_real_change_is_not_called_invisible() -> None:
    before = {"description": "Read notes."}
    assert invisible_change(before, {"description": "Read \uff4eotes."}) == (
        "changed only in look-alike characters (equal after NFKC normalisation)"
    )
    assert invisible_change(before, {"description": "Read notes and mail them."}) is None
    assert invisible_change({"description": "a\u200bb"}, {"description": "ab"}) == (
        "changed only in invisible characters (removed or moved)"
    )


def test_rename_source_finds_the_vanished_tool_a_new_one_resembles() -> None:
    old = {"name": "read", "description": "Read the notes file at path.", "inputSchema": {"type": "object"}}
    other = {"name": "wipe", "description": "Delete everything.", "inputSchema": {"type": "object"}}
    assert rename_source({**old, "name": "fetch"}, {"read": old, "wipe": other}) == ("read", 1.0)
    near = rename_source({**old, "name": "fetch", "description": "Read the notes file at path!"}, {"read": old})
    assert near is not None and near[0] == "read" and 0.9 <= near[1] < 1.0
    assert rename_source({**other, "name": "fetch"}, {"read": old}) is None


# -- through real processes --------------------------------------------------------------------


@pytest.mark.subprocess
async def test_a_renamed_tool_is_quarantined_as_renamed_from_the_old_name_until_approved(store: StateStore) -> None:
    with anyio.fail_after(90):
        listed, held = await pin_base_then(store, "renamed")
        assert listed == ["add_tool", "delete_notes"]
        assert held == {"fetch_notes": "renamed from read_notes (definition otherwise identical)"}
        async with Manager(changing("renamed"), catalog=False) as manager:
            guard = Guard(manager, store=store)
            with pytest.raises(ToolDefinitionChanged) as refused:
                await guard.call_tool("ch:fetch_notes", {"path": "a"})
            diff = refused.value.diff
            assert diff.startswith("# renamed from read_notes")
            assert '-  "name": "read_notes"' in diff and '+  "name": "fetch_notes"' in diff
            assert guard.approve("ch", "fetch_notes") == 1
            result = await guard.call_tool("ch:fetch_notes", {"path": "a"})
            assert "fetched notes of a" in str(result.content[0])


@pytest.mark.subprocess
async def test_a_rename_with_a_small_edit_is_still_caught(store: StateStore) -> None:
    with anyio.fail_after(90):
        listed, held = await pin_base_then(store, "renamed_edit")
    assert "fetch_notes" not in listed
    assert held["fetch_notes"].startswith("renamed from read_notes (definition ") and "% alike)" in held["fetch_notes"]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("variant", "named"),
    [
        ("invisible", "U+200B ZERO WIDTH SPACE, U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("tagged", "U+E0020 TAG ' '"),
        ("fullwidth", "look-alike characters"),
    ],
)
async def test_a_description_changed_only_in_invisible_characters_is_quarantined_with_the_code_points(
    store: StateStore, variant: str, named: str
) -> None:
    with anyio.fail_after(90):
        listed, held = await pin_base_then(store, variant)
        assert listed == ["add_tool", "delete_notes"]
        assert held["read_notes"].startswith("changed only in") and named in held["read_notes"]
        async with Manager(changing(variant), catalog=False) as manager:
            with pytest.raises(ToolDefinitionChanged) as refused:
                await Guard(manager, store=store).call_tool("ch:read_notes", {"path": "a"})
    assert refused.value.diff.startswith("# changed only in")
    assert "<U+" in refused.value.diff  # the diff shows the code points, not an empty-looking change


@pytest.mark.slow
@pytest.mark.subprocess
async def test_unchanged_tools_keep_their_pin_hash_through_a_rename_next_to_them(store: StateStore) -> None:
    with anyio.fail_after(90):
        async with Manager(changing("base"), catalog=False) as manager:
            guard = Guard(manager, store=store)
            guard.tools()
            before = guard.pins.get("ch", "delete_notes")
        await pin_base_then(store, "renamed")
    pin = next(p for p in _pins(store) if p[0] == "delete_notes")
    assert before is not None and pin[1] == before.hash and pin[2] == 1


def _pins(store: StateStore) -> list[tuple[str, str, int]]:
    with store.read() as db:
        rows = db.execute(text("SELECT tool, hash, approved FROM mcpmux_pins WHERE server='ch'")).all()
        return [(str(t), str(h), int(a)) for t, h, a in rows]


@pytest.mark.subprocess
async def test_a_tool_added_mid_session_to_a_pinned_server_waits_for_approval(store: StateStore) -> None:
    with anyio.fail_after(90):
        async with Manager(changing("base"), catalog=False) as manager:
            guard = Guard(manager, store=store)
            assert len(guard.tools()) == 3  # the first listing is trusted as a whole
            async with manager.subscribe() as events:
                await guard.call_tool("ch:add_tool", {"name": "late"})
                while "ch:late" not in [t.name for t in manager.tools()]:
                    await events.receive()
            assert "ch:late" not in [t.name for t in guard.tools()]
            with pytest.raises(ToolQuarantined, match="new tool on an already pinned server"):
                await guard.call_tool("ch:late")
            assert guard.approve("ch", "late") == 1
            assert "late ran" in str((await guard.call_tool("ch:late")).content[0])


def _write_config(project: Path, variant: str) -> None:
    (project / "mcpmux.yaml").write_text(
        "mcp:\n  servers:\n"
        f"    - name: ch\n      type: stdio\n      command: {json.dumps(sys.executable)}\n"
        f"      args: [{json.dumps(CHANGING)}]\n      env: {{TOOLS_VARIANT: {variant}}}\n",
        encoding="utf-8",
    )


def _mcpmux(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MCPMUX, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90, env=os.environ,
        cwd=project, check=False,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_cli_shows_a_rename_in_pins_and_approve(tmp_path: Path) -> None:
    _write_config(tmp_path, "base")
    assert _mcpmux(tmp_path, "tools", "ch", "--json").returncode == 0
    _write_config(tmp_path, "renamed")
    assert "ch:fetch_notes" not in _mcpmux(tmp_path, "tools", "ch", "--json").stdout
    pins = {p["tool"]: p for p in json.loads(_mcpmux(tmp_path, "pins", "--json").stdout)}
    assert pins["fetch_notes"]["state"] == "renamed"
    assert pins["fetch_notes"]["reason"] == "renamed from read_notes (definition otherwise identical)"
    table = _mcpmux(tmp_path, "pins").stdout
    assert "renamed from read_notes" in table
    approved = _mcpmux(tmp_path, "approve", "ch:fetch_notes", "--yes")
    assert approved.returncode == 0, approved.stderr
    assert "# renamed from read_notes" in approved.stdout and '+  "name": "fetch_notes"' in approved.stdout
    assert _mcpmux(tmp_path, "call", "ch:fetch_notes", '{"path": "a"}').stdout.strip() == "fetched notes of a"


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_cli_shows_the_code_points_of_an_invisible_change(tmp_path: Path) -> None:
    _write_config(tmp_path, "base")
    assert _mcpmux(tmp_path, "tools", "ch", "--json").returncode == 0
    _write_config(tmp_path, "invisible")
    refused = _mcpmux(tmp_path, "call", "ch:read_notes", '{"path": "a"}')
    assert refused.returncode == 1 and "<U+200B ZERO WIDTH SPACE>" in refused.stderr
    shown = _mcpmux(tmp_path, "approve", "ch:read_notes", "--yes").stdout
    assert "changed only in invisible characters: U+200B ZERO WIDTH SPACE" in shown
