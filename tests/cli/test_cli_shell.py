"""The CLI shell in process: error words and exit codes, ``--json`` errors, ``call`` arguments and ``--yes``,
the single-tool view, full text when piped. The servers are the built-in ones, run in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mcpmux.cli.arguments import call_arguments
from mcpmux.cli.connecting import pending_line
from mcpmux.cli.main import run
from mcpmux.manager import ServerState, ServerStatus

PROJECT = """\
mcp:
  servers:
    - {name: workspace, type: builtin, root: .}
  security:
    require_approval: ["workspace:glob"]
    denied_tools: ["workspace:delete"]
"""


def invoke(*args: str) -> tuple[int, str, str]:
    """Run the CLI through its error boundary (exit codes as a shell sees them)."""
    with CliRunner().isolation() as (out, err, _):
        code = run(list(args))
        sys.stdout.flush()
        sys.stderr.flush()
    return code, out.getvalue().decode(), err.getvalue().decode()


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mcpmux.yaml").write_text(PROJECT, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n", encoding="utf-8")
    return tmp_path


# -- words and exit codes ------------------------------------------------------------------------


def test_an_unknown_server_is_a_usage_error_that_suggests_the_closest_name(project: Path) -> None:
    code, out, err = invoke("tools", "workspac")
    assert code == 2 and out == ""
    assert "invalid configuration" not in err
    assert err.startswith("Error: no server named 'workspac'; did you mean 'workspace'?")


def test_a_tool_name_without_its_server_prefix_says_so_and_names_the_canonical_one(project: Path) -> None:
    assert invoke("tools", "workspace")[0] == 0  # fills the catalog the suggestion comes from
    code, _, err = invoke("call", "read_file", "path=notes.txt")
    assert code == 2 and "invalid configuration" not in err
    assert "'read_file' has no server prefix" in err and "did you mean 'workspace:read_file'?" in err


def test_an_unknown_tool_is_a_usage_error_with_suggestions(project: Path) -> None:
    code, _, err = invoke("call", "workspace:read_fil")
    assert code == 2 and "did you mean 'workspace:read_file'" in err


def test_with_json_an_error_is_an_error_object_on_stdout_and_a_line_on_stderr(project: Path) -> None:
    code, out, err = invoke("--json", "call", "workspace:read_fil")
    assert code == 2 and err.startswith("Error: no tool named")
    error = json.loads(out)["error"]
    assert error["type"] == "ToolNotFound" and error["exit_code"] == 2
    assert "did you mean" in error["message"] and error["hint"] == "`mcpmux tools` lists every tool"


def test_with_json_a_usage_error_of_click_is_an_error_object_too(project: Path) -> None:
    code, out, _ = invoke("call", "workspace:read_file", "{not json", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["exit_code"] == 2 and "not valid JSON" in error["message"]


def test_with_json_a_config_error_lists_its_problems(project: Path) -> None:
    (project / "mcpmux.yaml").write_text("mcp: {servers: [{name: x, comand: y}]}\n", encoding="utf-8")
    code, out, _ = invoke("list", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["type"] == "ConfigError" and error["problems"]


# -- call: arguments and --yes ------------------------------------------------------------------------


def test_key_value_arguments_take_json_values_when_they_parse_else_strings() -> None:
    args = call_arguments(("path=a.txt", "n=3", "ok=true", "none=null", "list=[1,2]", "text=hello world"), None)
    assert args == {"path": "a.txt", "n": 3, "ok": True, "none": None, "list": [1, 2], "text": "hello world"}
    # 007 is not JSON: a string after `=`, an error after `:=` (which insists on JSON).
    assert call_arguments(("n:=7", "s=007", "eq=a=b"), None) == {"n": 7, "s": "007", "eq": "a=b"}


def test_a_json_object_still_works_and_bad_words_are_usage_errors() -> None:
    assert call_arguments(('{"path": "a.txt"}',), None) == {"path": "a.txt"}
    assert call_arguments((), None) == {}
    for words in (("hello",), ("path=a", "oops"), ("n:=nope",), ("code:=007",), ("[1, 2]",)):
        with pytest.raises(click.BadParameter):
            call_arguments(words, None)


def test_call_with_key_value_pairs_reaches_the_tool(project: Path) -> None:
    code, out, err = invoke("call", "workspace:read_file", "path=notes.txt", "max_lines=1")
    assert code == 0, err
    assert "first line" in out and "second line" not in out


def test_yes_approves_a_call_that_needs_approval_for_this_invocation_only(project: Path) -> None:
    refused, _, err = invoke("call", "workspace:glob", "pattern=*.txt")
    assert refused == 1 and "not approved" in err and "--yes" in err
    code, out, err = invoke("call", "workspace:glob", "pattern=*.txt", "--yes")
    assert code == 0 and "notes.txt" in out and "approved by --yes" in err
    again, _, _ = invoke("call", "workspace:glob", "pattern=*.txt")
    assert again == 1  # never remembered


def test_yes_does_not_override_a_deny_rule(project: Path) -> None:
    code, _, err = invoke("call", "workspace:delete", "path=notes.txt", "-y")
    assert code == 1 and "is denied by security.denied_tools" in err
    assert (project / "notes.txt").exists()


# -- one tool -----------------------------------------------------------------------------------


def test_tools_server_tool_shows_description_parameters_and_annotations(project: Path) -> None:
    code, out, err = invoke("tools", "workspace:read_file")
    assert code == 0, err
    assert out.startswith("workspace:read_file")
    assert "devices are refused." in out  # the whole description, not its first line
    assert "parameters (* required)" in out and "path*" in out and "max_lines" in out
    assert "default 1; minimum 1" in out and "integer | null" in out
    assert "readOnlyHint: true" in out


def test_tools_server_tool_in_json_is_the_tool_object(project: Path) -> None:
    code, out, _ = invoke("tools", "workspace:read_file", "--json")
    tool = json.loads(out)
    assert code == 0 and tool["name"] == "workspace:read_file"
    assert tool["input_schema"]["required"] == ["path"] and tool["annotations"]["readOnlyHint"] is True


def test_tools_server_tool_for_an_unknown_or_denied_tool_is_a_usage_error(project: Path) -> None:
    assert invoke("tools", "workspace:nope")[0] == 2
    code, _, err = invoke("tools", "workspace:delete")
    assert code == 2 and "no tool named 'workspace:delete'" in err


# -- output when piped -----------------------------------------------------------------------------------


def test_piped_tables_carry_the_whole_text_without_an_ellipsis(project: Path) -> None:
    code, out, _ = invoke("tools", "workspace")
    assert code == 0
    assert "…" not in out
    # The description of read_file is several lines long; piped, all of it is on the tool's row.
    row = next(line for line in out.splitlines() if line.startswith("workspace:read_file "))
    assert "devices are refused." in row and "path*, start_line, max_lines" in row


# -- progress ----------------------------------------------------------------------------------------------


def _status(name: str, state: ServerState) -> ServerStatus:
    return ServerStatus(name, "stdio", state, "", "", None, 0, 0, None, None, None, ())


def test_the_progress_line_names_the_pending_servers_and_the_time() -> None:
    statuses = [
        _status("a", ServerState.CONNECTED),
        _status("slow", ServerState.STARTING),
        _status("flaky", ServerState.DEGRADED),
        _status("off", ServerState.DISABLED),
    ]
    assert pending_line(statuses, 3.24) == "connecting: 1 of 4 ready, waiting for slow, flaky (3.2 s)"
    many = [_status(f"s{i}", ServerState.STARTING) for i in range(6)]
    assert pending_line(many, 0).endswith("waiting for s0, s1, s2, s3 and 2 more (0.0 s)")


# -- not configuration: tokens and other hosts' files ----------------------------------------------------


def test_revoking_an_unknown_token_is_a_usage_error_naming_the_close_one(project: Path) -> None:
    assert invoke("token", "create", "alice")[0] == 0
    code, _, err = invoke("token", "revoke", "alic")
    assert code == 2 and "invalid configuration" not in err
    assert err.startswith("Error: no token named 'alic'; did you mean 'alice'?")


def test_importing_from_a_missing_file_is_a_usage_error_that_suggests_a_host(project: Path) -> None:
    code, out, err = invoke("import", "--from", "claude-desktp", "--json")
    assert code == 2 and "invalid configuration" not in err
    assert "no file or host named 'claude-desktp'; did you mean 'claude-desktop'" in err
    assert json.loads(out)["error"]["type"] == "NotFound"


def test_requiring_auth_without_any_token_is_a_usage_error() -> None:
    from mcpmux.errors import UsageError, exit_code_for
    from mcpmux.policy import StateStore
    from mcpmux.serve.run import http_security
    from mcpmux.web.tokens import TokenStore

    with StateStore() as store, pytest.raises(UsageError, match="--auth requires a bearer token") as caught:
        http_security("127.0.0.1", TokenStore(store), require_auth=True)
    assert exit_code_for(caught.value) == 2 and "invalid configuration" not in str(caught.value)
