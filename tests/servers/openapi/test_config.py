"""``type: openapi`` in configuration files: fields, interpolation, secrets, relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpmux.config.loader import load_config
from mcpmux.config.models import OpenAPIServerConfig
from mcpmux.errors import ConfigError


def _load(tmp_path: Path, entry: str, environ: dict[str, str] | None = None) -> OpenAPIServerConfig:
    (tmp_path / "conf").mkdir(exist_ok=True)
    path = tmp_path / "conf" / "mcpmux.yaml"
    path.write_text("mcp:\n  servers:\n    - name: api\n      type: openapi\n" + entry)
    server = load_config(path, cwd=tmp_path, environ=environ or {}).server("api")
    assert isinstance(server, OpenAPIServerConfig)
    return server


def test_a_relative_spec_path_is_relative_to_the_file_that_names_it(tmp_path: Path) -> None:
    server = _load(tmp_path, "      spec: specs/api.yaml\n")
    assert server.spec == str((tmp_path / "conf" / "specs" / "api.yaml").resolve())
    url = _load(tmp_path, "      spec: https://example.invalid/openapi.json\n")
    assert url.spec == "https://example.invalid/openapi.json"


def test_auth_values_are_interpolated_and_kept_secret(tmp_path: Path) -> None:
    entry = "      spec: /x.yaml\n      auth: {type: api_key, in: header, name: X-Key, value: '${API_KEY}'}\n"
    server = _load(tmp_path, entry, {"API_KEY": "k-very-secret"})
    assert server.auth is not None and server.auth.value is not None
    assert server.auth.value.get_secret_value() == "k-very-secret"
    assert "k-very-secret" in server.secret_values
    assert "k-very-secret" not in repr(server)


def test_an_unset_variable_fails_only_that_server(tmp_path: Path) -> None:
    server = _load(tmp_path, "      spec: /x.yaml\n      auth: {type: bearer, token: '${MISSING_TOKEN}'}\n")
    error = server.unresolved_error()
    assert error is not None and "MISSING_TOKEN" in str(error)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("      spec: /x.yaml\n      auth: {type: bearer}\n", "needs token"),
        ("      spec: /x.yaml\n      auth: {type: basic, username: u}\n", "needs password"),
        ("      spec: /x.yaml\n      auth: {type: oauth}\n", "auth.type"),
        ("      spec: /x.yaml\n      base_url: ftp://x\n", "http:// or https://"),
        ("      base_url: http://x\n", "spec"),
    ],
)
def test_invalid_entries_are_refused_with_the_reason(tmp_path: Path, entry: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        _load(tmp_path, entry)
