"""``ServeConfig``: ``mcpmux serve``'s options as one value; checked before anything starts, the config loaded once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpmux.errors import ConfigError, UsageError
from mcpmux.serve import config as serve_config
from mcpmux.serve.config import ServeConfig, address

CONFIG = """
mcp:
  servers:
    - name: tiny
      command: python
      args: ["-c", "pass"]
toolsets:
  kit:
    tools: ["tiny:*"]
"""


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (ServeConfig(sse=True), "--sse and --json-response need --http"),
        (ServeConfig(json_response=True), "--sse and --json-response need --http"),
        (ServeConfig(replica_id="a"), "--replica-id and --advertise need --http"),
        (ServeConfig(http=":0", oauth_issuer="https://as.example"), "--oauth-issuer and --oauth-resource go together"),
        (ServeConfig(http=":0", oauth_client_id="c"), "--oauth-client-id and --oauth-introspection need"),
        (ServeConfig(http=":0", oauth_issuer="https://as.example", oauth_resource="https://gw.example",
                     oauth_introspection="https://as.example/i"), "--oauth-introspection needs --oauth-client-id"),
        (ServeConfig(allow_process_sources=True), "--allow-process-sources needs --http and the REST API"),
        (ServeConfig(http=":0", api=False, allow_process_sources=True), "--allow-process-sources needs --http"),
        (ServeConfig(http=":0", agents=("a",), allow_process_sources=True), "--allow-process-sources needs --http"),
        (ServeConfig(http="nowhere"), "--http: 'nowhere' is not HOST:PORT"),
        (ServeConfig(ws="h:99999"), "--ws: 'h:99999' is not HOST:PORT"),
    ],
)  # fmt: skip
def test_options_that_cannot_go_together_are_a_usage_error_before_anything_loads(
    settings: ServeConfig, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_config, "load_config", _never)
    with pytest.raises(UsageError, match=message.replace("?", r"\?").replace("(", r"\(")):
        settings.prepare()


def _never(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("the configuration was loaded before the options were checked")


def test_an_address_is_host_and_port_with_loopback_by_default() -> None:
    assert address("--http", ":8765") == ("127.0.0.1", 8765)
    assert address("--http", "[::1]:9") == ("::1", 9)
    assert address("--ws", "0.0.0.0:80") == ("0.0.0.0", 80)


def test_prepare_loads_the_configuration_once_and_builds_every_face(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    loads: list[object] = []
    real = serve_config.load_config

    def counting(*args: Any, **kwargs: Any) -> Any:
        loads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(serve_config, "load_config", counting)
    told: list[frozenset[str]] = []
    prepared = ServeConfig(http="127.0.0.1:0", ws=":0", toolset="kit", config_path=path).prepare(redact=told.append)
    try:
        assert loads == [(path,)]
        assert told, "the secrets were not handed to the caller's redaction"
        options = prepared.options
        assert options.http is not None and options.http.host == "127.0.0.1"
        assert options.ws == ("127.0.0.1", 0) and options.ws_security is not None
        assert options.api is not None and options.console is not None and not options.stdio
        assert options.toolset == "kit"
        assert [s.name for s in prepared.config.servers] == ["tiny"]
    finally:
        prepared.close()


def test_no_face_named_is_stdio_and_agents_leave_out_the_api_and_the_console(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    prepared = ServeConfig(config_path=path).prepare()
    try:
        assert prepared.options.stdio and prepared.options.http is None and prepared.options.api is None
    finally:
        prepared.close()
    assert not ServeConfig(http=":0", agents=("helper",)).serves_api
    assert not ServeConfig(http=":0", agents=("helper",)).serves_ui
    assert ServeConfig(http=":0").serves_api and not ServeConfig().serves_api


def test_an_unknown_toolset_or_a_public_bind_without_tokens_fails_before_serving(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown toolset 'nosuch'"):
        ServeConfig(toolset="nosuch", config_path=path).prepare()
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0 without auth"):
        ServeConfig(http="0.0.0.0:0", config_path=path).prepare()
