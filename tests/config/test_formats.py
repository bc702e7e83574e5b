"""Every supported configuration format, read from realistic files."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcpmux.config import (
    BuiltinServerConfig,
    SseServerConfig,
    StdioServerConfig,
    StreamableHttpServerConfig,
    TcpServerConfig,
    WebSocketServerConfig,
    load_file,
)

DATA = Path(__file__).parent / "data"


def test_claude_desktop_config_is_read_with_names_made_safe_and_foreign_keys_warned() -> None:
    config = load_file(DATA / "claude_desktop_config.json", environ={})
    names = [s.name for s in config.servers]
    assert names == ["filesystem", "github-server", "time"]
    fs = config.server("filesystem")
    assert isinstance(fs, StdioServerConfig)
    assert fs.command == "npx"
    assert fs.args[-1] == "/Users/alice/Downloads"
    assert config.server("time").enabled is False
    github = config.server("github-server")
    assert isinstance(github, StdioServerConfig)
    assert github.env["GITHUB_PERSONAL_ACCESS_TOKEN"].get_secret_value() == "ghp_literalSecretValue123"
    assert any("'GitHub Server' is used as 'github-server'" in w for w in config.warnings)
    assert "ghp_literalSecretValue123" in config.secret_values


def test_claude_code_mcp_json_types_and_interpolation_with_defaults() -> None:
    env = {"API_KEY": "sk-test-123456", "HOME": "/home/bob"}
    config = load_file(DATA / "claude_code.mcp.json", environ=env)
    api = config.server("api-server")
    assert isinstance(api, StreamableHttpServerConfig)
    assert api.url == "https://api.example.com/mcp"
    assert api.headers["Authorization"].get_secret_value() == "Bearer sk-test-123456"
    assert isinstance(config.server("events"), SseServerConfig)
    local = config.server("local-db")
    assert isinstance(local, StdioServerConfig)
    assert local.args == ("--config", "/home/bob/db.json")
    assert local.env["CACHE_DIR"].get_secret_value() == "/tmp/cache"


def test_cursor_config_infers_transport_from_the_url() -> None:
    config = load_file(DATA / "cursor_mcp.json", environ={"CURSOR_KEY": "k-cursor-1"})
    assert isinstance(config.server("remote"), StreamableHttpServerConfig)
    assert isinstance(config.server("legacy-sse"), SseServerConfig)
    assert isinstance(config.server("tool"), StdioServerConfig)
    assert any("autoApprove" in w for w in config.warnings)


def test_vscode_mcp_json_with_comments_inputs_and_workspace_folder(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(DATA / "vscode", project)
    env = {"MCPMUX_INPUT_PERPLEXITY_KEY": "pplx-secret-value"}
    config = load_file(project / ".vscode" / "mcp.json", environ=env)
    perplexity = config.server("perplexity")
    assert isinstance(perplexity, StdioServerConfig)
    assert perplexity.env["PERPLEXITY_API_KEY"].get_secret_value() == "pplx-secret-value"
    fetch = config.server("fetch")
    assert isinstance(fetch, StdioServerConfig)
    assert fetch.args[-1] == f"{project.resolve()}/cache"
    assert isinstance(config.server("github"), StreamableHttpServerConfig)


def test_vscode_input_without_its_variable_names_the_variable_to_set(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    shutil.copytree(DATA / "vscode", project)
    server = load_file(project / ".vscode" / "mcp.json", environ={}).server("perplexity")
    error = server.unresolved_error()
    assert error is not None and error.variables == ["MCPMUX_INPUT_PERPLEXITY_KEY"]
    assert "servers.perplexity.env.PERPLEXITY_API_KEY" in str(error)


def test_legacy_servers_array_accepts_transport_and_network_schemes() -> None:
    config = load_file(DATA / "servers_array.json", environ={})
    assert isinstance(config.server("time"), StdioServerConfig)
    assert isinstance(config.server("remote"), WebSocketServerConfig)
    assert isinstance(config.server("raw"), TcpServerConfig)


def test_registry_manifest_becomes_an_npx_server_whose_required_variables_are_checked() -> None:
    unresolved = load_file(DATA / "server.json", environ={}).server("weather-server").unresolved
    assert ["WEATHER_API_KEY is not set" in p.reason for p in unresolved] == [True]
    config = load_file(DATA / "server.json", environ={"WEATHER_API_KEY": "wk-123456"})
    server = config.server("weather-server")
    assert isinstance(server, StdioServerConfig)
    assert server.command == "npx"
    assert server.args == ("-y", "@acme/weather-mcp@1.4.0", "--units", "metric")
    assert server.env["WEATHER_API_KEY"].get_secret_value() == "wk-123456"
    assert server.env["WEATHER_REGION"].get_secret_value() == "eu"


def test_registry_manifest_with_only_a_remote_becomes_a_network_server() -> None:
    config = load_file(DATA / "remote_server.json", environ={"AUTHORIZATION": "Bearer abc-123"})
    server = config.server("remote-only")
    assert isinstance(server, SseServerConfig)
    assert server.headers["Authorization"].get_secret_value() == "Bearer abc-123"


def test_our_yaml_reads_every_section() -> None:
    config = load_file(DATA / "mcpmux.yaml", environ={"GITHUB_TOKEN": "ghp_x1234", "OPENAI_API_KEY": "sk-abcd"})
    assert [s.name for s in config.servers] == ["filesystem", "workspace", "github"]
    assert isinstance(config.server("workspace"), BuiltinServerConfig)
    assert config.server("github").timeout_ms == 60000
    assert config.security.require_approval is True
    assert config.security.sandbox.filesystem == ("/srv/data",)
    assert config.security.allowed_tools == ("filesystem:read_*", "filesystem:list_directory")
    assert config.llm.model == "gpt-4.1-mini"
    assert config.llm.api_key is not None and config.llm.api_key.get_secret_value() == "sk-abcd"


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "with-bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (DATA / "cursor_mcp.json").read_bytes())
    assert len(load_file(path, environ={"CURSOR_KEY": "k"}).servers) == 3
