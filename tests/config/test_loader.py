"""Discovery, precedence, interpolation and every kind of bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpmux.config import StdioServerConfig, config_sources, load_config, load_file
from mcpmux.config.interpolate import expand
from mcpmux.errors import ConfigError, ServerNotConfigured


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def user_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "mcpmux" / "config.yaml"


STDIO = "    - {{name: {name}, type: stdio, command: {command}}}\n"


def servers_yaml(*entries: tuple[str, str], settings: str = "") -> str:
    body = "".join(STDIO.format(name=n, command=c) for n, c in entries)
    return "mcp:\n  servers:\n" + body + settings


@pytest.mark.usefixtures("isolated_home")
class TestPrecedence:
    def test_no_file_anywhere_gives_the_builtin_servers(self, tmp_path: Path) -> None:
        config = load_config(cwd=tmp_path)
        assert [s.name for s in config.servers] == ["workspace", "content_store"]
        assert config.sources == ("<defaults>",)

    def test_user_then_project_then_explicit_override_by_server_name(self, tmp_path: Path) -> None:
        write(user_file(), servers_yaml(("a", "user-a"), ("b", "user-b"), settings="  settings: {timeout_ms: 5000}\n"))
        write(tmp_path / "mcpmux.yaml", servers_yaml(("b", "project-b"), ("c", "project-c")))
        explicit = write(tmp_path / "extra.yaml", servers_yaml(("c", "explicit-c")))
        config = load_config(explicit, cwd=tmp_path)
        commands = {s.name: s.command for s in config.servers if isinstance(s, StdioServerConfig)}
        assert commands == {"a": "user-a", "b": "project-b", "c": "explicit-c"}
        assert config.settings.timeout_ms == 5000
        assert config.sources == (str(user_file()), str(tmp_path / "mcpmux.yaml"), str(explicit))

    def test_settings_merge_key_by_key(self, tmp_path: Path) -> None:
        write(user_file(), "mcp:\n  settings: {timeout_ms: 5000, retry_attempts: 7}\n")
        write(tmp_path / "mcpmux.yaml", "mcp:\n  settings: {timeout_ms: 9000}\n")
        settings = load_config(cwd=tmp_path).settings
        assert (settings.timeout_ms, settings.retry_attempts) == (9000, 7)

    def test_environment_variable_names_the_config_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = write(tmp_path / "elsewhere.yaml", servers_yaml(("e", "env-e")))
        monkeypatch.setenv("MCPMUX_CONFIG", str(path))
        assert [s.role for s in config_sources(cwd=tmp_path)] == ["user", "project", "MCPMUX_CONFIG"]
        assert load_config(cwd=tmp_path).server("e").name == "e"

    def test_xdg_config_home_is_honoured(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
        write(tmp_path / "xdg" / "mcpmux" / "config.yaml", servers_yaml(("x", "xdg")))
        assert load_config(cwd=tmp_path).server("x").name == "x"

    def test_a_missing_explicit_file_is_an_error(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="does not exist"):
            load_config(tmp_path / "nope.yaml", cwd=tmp_path)

    def test_an_unknown_server_lists_the_known_ones(self, tmp_path: Path) -> None:
        with pytest.raises(ServerNotConfigured, match="configured: content_store, workspace"):
            load_config(cwd=tmp_path).server("nope")


class TestInterpolation:
    def test_plain_default_and_escape(self) -> None:
        env = {"A": "1", "EMPTY": ""}
        assert expand("${A}-${B:-two}-$${A}-${EMPTY:-d}", env).value == "1-two-${A}-d"

    def test_unset_without_default_is_reported(self) -> None:
        result = expand("x${NOPE}y", {})
        assert [m.name for m in result.missing] == ["NOPE"]

    def test_only_env_headers_args_and_url_are_expanded(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - name: s\n      type: stdio\n      command: ${CMD}\n"
            "      args: ['${ARG}']\n      env: {K: '${VAL}'}\n",
        )
        server = load_file(path, environ={"CMD": "nope", "ARG": "arg1", "VAL": "val1"}).server("s")
        assert isinstance(server, StdioServerConfig)
        assert (server.command, server.args, server.env["K"].get_secret_value()) == ("${CMD}", ("arg1",), "val1")

    def test_missing_variable_names_server_and_field(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - name: gh\n      type: http\n      url: https://x/mcp\n"
            "      headers: {Authorization: 'Bearer ${GH_TOKEN}'}\n",
        )
        server = load_file(path, environ={}).server("gh")
        problem = server.unresolved[0]
        assert problem.path == "mcp.servers[0] (gh).headers.Authorization"
        assert "GH_TOKEN" in problem.reason and "'gh'" in problem.reason and "headers.Authorization" in problem.reason
        assert problem.line == 6

    def test_a_disabled_server_with_a_missing_variable_only_warns(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - {name: off, type: stdio, command: x, enabled: false, env: {K: '${NOPE}'}}\n",
        )
        config = load_file(path, environ={})
        assert any("NOPE" in w for w in config.warnings)


BAD_YAML = """\
mcp:
  servers:
    - name: ok
      type: stdio
      command: npx
    - name: ok
      type: stdio
      command: other
    - name: Not_Valid!
      type: stdio
      command: x
    - name: nocmd
      type: stdio
    - name: nourl
      type: http
    - name: weird
      type: pigeon
    - name: types
      type: stdio
      command: x
      args: 5
      timeout_ms: soon
  settings:
    retry_attempts: -1
"""


class TestBadInput:
    def test_every_problem_is_listed_with_file_path_line_and_reason(self, tmp_path: Path) -> None:
        path = write(tmp_path / "bad.yaml", BAD_YAML)
        with pytest.raises(ConfigError) as caught:
            load_file(path, environ={})
        found = {(p.path, p.line) for p in caught.value.problems}
        reasons = " | ".join(p.reason for p in caught.value.problems)
        assert ("mcp.servers[1] (ok)", 6) in found and "duplicate server name 'ok'" in reasons
        assert ("mcp.servers[2] (Not_Valid!).name", 9) in found
        assert ("mcp.servers[3] (nocmd).command", 12) in found
        assert ("mcp.servers[4] (nourl).url", 14) in found
        assert ("mcp.servers[5] (weird)", 16) in found and "unknown server type 'pigeon'" in reasons
        assert ("mcp.servers[6] (types).args", 21) in found
        assert ("mcp.servers[6] (types).timeout_ms", 22) in found
        assert ("mcp.settings.retry_attempts", 24) in found
        assert all(p.source == str(path) for p in caught.value.problems)

    def test_invalid_yaml_reports_line_and_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "broken.yaml", "mcp:\n  servers: [\n    {name: a\n")
        with pytest.raises(ConfigError) as caught:
            load_file(path)
        problem = caught.value.problems[0]
        assert "invalid YAML" in problem.reason and problem.line is not None and problem.column is not None

    def test_invalid_json_reports_line_and_column(self, tmp_path: Path) -> None:
        path = write(tmp_path / "broken.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n  "x": 1\n}')
        with pytest.raises(ConfigError) as caught:
            load_file(path)
        assert (caught.value.problems[0].line, "invalid JSON" in caught.value.problems[0].reason) == (5, True)

    def test_unreadable_and_non_utf8_files(self, tmp_path: Path) -> None:
        binary = tmp_path / "bin.yaml"
        binary.write_bytes(b"mcp: \xff\xfe")
        with pytest.raises(ConfigError, match="not UTF-8"):
            load_file(binary)
        unreadable = write(tmp_path / "locked.yaml", "mcp: {}\n")
        unreadable.chmod(0)
        if os.access(unreadable, os.R_OK):  # root reads anything: use a directory instead
            unreadable = tmp_path / "adir.yaml"
            unreadable.mkdir()
            with pytest.raises(ConfigError, match="no such file"):
                load_file(unreadable)
        else:
            with pytest.raises(ConfigError, match="cannot read"):
                load_file(unreadable)

    def test_unknown_keys_in_our_format_are_errors_with_a_suggestion(self, tmp_path: Path) -> None:
        path = write(tmp_path / "c.yaml", "mcp:\n  servers:\n    - {name: a, type: stdio, comand: x}\n  setings: {}\n")
        with pytest.raises(ConfigError) as caught:
            load_file(path)
        text = str(caught.value)
        assert "did you mean 'command'" in text and "mcp.setings" in text

    def test_a_network_type_without_url_and_a_wrong_scheme(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - {name: a, type: websocket, url: 'http://x'}\n    - {name: b, type: tcp}\n",
        )
        with pytest.raises(ConfigError) as caught:
            load_file(path)
        text = str(caught.value)
        assert "ws:// or wss://" in text and "mcp.servers[1] (b).url: required for type 'tcp'" in text

    def test_a_secret_value_never_appears_in_a_problem(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - {name: a, type: http, url: 'ftp://${TOKEN}@host', headers: {X: '${TOKEN}'}}\n",
        )
        with pytest.raises(ConfigError) as caught:
            load_file(path, environ={"TOKEN": "supersecret-token-value"})
        assert "supersecret-token-value" not in str(caught.value)

    def test_not_a_mapping_and_unrecognised_documents(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="expected a mapping at the top level"):
            load_file(write(tmp_path / "a.yaml", "- 1\n- 2\n"))
        with pytest.raises(ConfigError, match="not a recognised MCP configuration"):
            load_file(write(tmp_path / "b.json", '{"hello": 1}'))


class TestSecretValues:
    def test_credentials_are_masked_but_ordinary_values_are_not(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - name: s\n      type: stdio\n      command: x\n"
            "      args: ['${HOME}/db.json']\n"
            "      env: {LOG_LEVEL: info, MODE: description, GITHUB_TOKEN: short-tok, BLOB: '${BLOB}',"
            " TZ: Europe/Paris}\n",
        )
        environ = {"HOME": "/home/alice", "BLOB": "AbC123dEf456GhI789"}
        secrets = load_file(path, environ=environ).secret_values
        assert secrets == {"short-tok", "AbC123dEf456GhI789"}

    def test_header_values_and_api_keys_are_always_secret(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "c.yaml",
            "mcp:\n  servers:\n    - {name: h, type: http, url: 'https://x/mcp', headers: {X-Team: blue-team}}\n"
            "llm: {api_key: '${OPENAI_API_KEY}'}\n",
        )
        secrets = load_file(path, environ={"OPENAI_API_KEY": "sk-test"}).secret_values
        assert secrets == {"blue-team", "sk-test"}


def test_a_header_on_a_tcp_server_is_refused_not_silently_dropped(tmp_path: Path) -> None:
    entry = '{name: t, type: tcp, url: "tcp://127.0.0.1:9", headers: {Authorization: "Bearer x"}}'
    path = write(tmp_path / "c.yaml", f"mcp:\n  servers:\n    - {entry}\n")
    with pytest.raises(ConfigError, match=r"mcp\.servers\[0\] \(t\)\.headers: a tcp server gets no headers"):
        load_file(path)
    write(path, 'mcp:\n  servers:\n    - {name: t, type: tcp, url: "tcp://127.0.0.1:9"}\n')
    assert load_file(path).server("t").type == "tcp"
