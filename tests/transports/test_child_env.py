"""The environment of a stdio child: trust stores and proxies pass, ``settings.env_passthrough`` adds more,
and a child that fails on a certificate or a proxy is told apart with a hint that says what to pass."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from mcpmux.config import load_file
from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import Connection
from mcpmux.errors import ServerExited
from mcpmux.transports.stdio import NETWORK_ENV_VARS
from tests.transports.conftest import WAIT_S, fixture_config, session_over

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CORPORATE = {
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "SSL_CERT_DIR": "/etc/corp/certs",
    "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "HTTPS_PROXY": "http://proxy.corp:3128",
    "https_proxy": "http://proxy.corp:3128",
    "HTTP_PROXY": "http://proxy.corp:3128",
    "no_proxy": "localhost,127.0.0.1",
    "NO_PROXY": "localhost,127.0.0.1",
}


async def test_trust_stores_proxies_and_configured_globs_reach_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in CORPORATE.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CORP_CA_PATH", "/etc/corp/extra.pem")
    monkeypatch.setenv("PIP_CERT", "/etc/corp/pip.pem")
    monkeypatch.setenv("MCPMUX_TEST_LEAK", "secret")
    settings = Settings(env_passthrough=("CORP_*", "PIP_CERT"))
    with anyio.fail_after(WAIT_S):
        async with session_over(fixture_config("--print-env"), settings) as (streams, session):
            await session.initialize()
            seen = json.loads(streams.stderr_tail().splitlines()[0])
    assert {key: seen.get(key) for key in CORPORATE} == CORPORATE
    assert (seen["CORP_CA_PATH"], seen["PIP_CERT"]) == ("/etc/corp/extra.pem", "/etc/corp/pip.pem")
    assert "MCPMUX_TEST_LEAK" not in seen


def test_the_defaults_name_every_trust_store_and_proxy_in_both_cases() -> None:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert name in NETWORK_ENV_VARS
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        assert name in NETWORK_ENV_VARS and name.lower() in NETWORK_ENV_VARS


def test_env_passthrough_is_read_from_settings_as_a_list_or_one_name(tmp_path: Path) -> None:
    path = tmp_path / "mcpmux.yaml"
    path.write_text("mcp:\n  settings: {env_passthrough: CORP_*}\n  servers: []\n", encoding="utf-8")
    assert load_file(path).settings.env_passthrough == ("CORP_*",)
    path.write_text("mcp:\n  settings: {env_passthrough: [A, 'B_*']}\n  servers: []\n", encoding="utf-8")
    assert load_file(path).settings.env_passthrough == ("A", "B_*")


@pytest.mark.parametrize(
    "stderr",
    [
        "error: invalid peer certificate: UnknownIssuer",  # uv
        "npm error code SELF_SIGNED_CERT_IN_CHAIN",  # npm
        "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed",  # Python
        "ProxyError: Cannot connect to proxy.",  # requests
    ],
)
async def test_a_child_failing_on_a_certificate_or_proxy_is_told_how_to_pass_the_variable(stderr: str) -> None:
    server = StdioServerConfig(name="behind-proxy", command="sh", args=("-c", f"echo '{stderr}' >&2; exit 1"))
    with anyio.fail_after(WAIT_S), pytest.raises(ServerExited) as caught:
        async with Connection(server, Settings()):
            pass
    assert stderr in caught.value.stderr_tail
    assert caught.value.hint is not None and "env_passthrough" in caught.value.hint


async def test_a_child_failing_otherwise_gets_the_usual_hint() -> None:
    server = StdioServerConfig(name="plain", command="sh", args=("-c", "echo 'no such file' >&2; exit 1"))
    with anyio.fail_after(WAIT_S), pytest.raises(ServerExited) as caught:
        async with Connection(server, Settings()):
            pass
    assert caught.value.hint is not None and "env_passthrough" not in caught.value.hint
