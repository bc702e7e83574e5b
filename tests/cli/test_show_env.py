"""``mcpmux show``'s view of a stdio child's environment is the one the child really gets."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from mcpmux.cli.show_cmds import _child_environment
from mcpmux.config.models import Config, Settings, StdioServerConfig


def test_the_shown_environment_includes_what_settings_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORP_CA_BUNDLE", "/etc/corp/ca.pem")
    monkeypatch.setenv("UNRELATED_VALUE", "x")
    server = StdioServerConfig(name="s", command="s", env={"TOKEN": SecretStr("t0ken-value")})
    config = Config(servers=(server,), settings=Settings(env_passthrough=("CORP_*",)))
    shown = _child_environment(server, config)
    assert shown is not None
    assert shown["CORP_CA_BUNDLE"] == "/etc/corp/ca.pem"
    assert "UNRELATED_VALUE" not in shown
    assert shown["TOKEN"] == "****"
