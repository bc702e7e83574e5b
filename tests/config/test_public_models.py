"""The public model names are usable as a library user expects: constructible, and single strings as lists."""

from __future__ import annotations

import pytest

import mcpmux
from mcpmux.config import SandboxConfig, SecurityConfig, StdioServerConfig, StreamableHttpServerConfig
from mcpmux.errors import ConfigError


def test_server_config_builds_a_stdio_server_by_default() -> None:
    server = mcpmux.ServerConfig(name="time", command="uvx", args=["mcp-server-time"])
    assert isinstance(server, StdioServerConfig) and isinstance(server, mcpmux.ServerConfig)
    assert server.args == ("mcp-server-time",)


def test_server_config_builds_the_type_it_is_given() -> None:
    server = mcpmux.ServerConfig(name="gh", type="http", url="https://example.com/mcp")
    assert isinstance(server, StreamableHttpServerConfig)
    assert not isinstance("gh", mcpmux.ServerConfig)


def test_servers_built_so_make_a_config() -> None:
    config = mcpmux.Config(servers=(mcpmux.ServerConfig(name="a", command="x"),))
    assert config.server("a").type == "stdio"


def test_invalid_fields_are_a_config_error_listing_each() -> None:
    with pytest.raises(ConfigError) as caught:
        mcpmux.ServerConfig(name="Bad!", type="http")
    assert sorted(p.path for p in caught.value.problems) == ["name", "url"]


def test_a_single_path_or_pattern_is_a_one_item_list() -> None:
    assert SandboxConfig.model_validate({"filesystem": "/srv/data", "writable": "/tmp"}).filesystem == ("/srv/data",)
    security = SecurityConfig.model_validate({"allowed_tools": "fs:read_*", "denied_tools": "fs:rm"})
    assert (security.allowed_tools, security.denied_tools) == (("fs:read_*",), ("fs:rm",))


def test_transport_type_names_every_kind_of_entry_and_is_its_string() -> None:
    from typing import get_args

    from mcpmux import TransportType
    from mcpmux.config.models import _AnyServerConfig

    union = get_args(get_args(_AnyServerConfig)[0])
    assert {model.model_fields["type"].default for model in union} == {t.value for t in TransportType}
    built = mcpmux.ServerConfig(name="gh", type=TransportType.HTTP, url="https://example.com/mcp")
    assert type(built).__name__ == "StreamableHttpServerConfig"
    assert TransportType(built.type) is TransportType.HTTP and built.type == "http"
    assert TransportType("tcp") is TransportType.TCP
