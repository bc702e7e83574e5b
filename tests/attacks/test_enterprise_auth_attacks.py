"""Attacks on SEP-990 (enterprise-managed authorization): the IdP's token exchange for an ID-JAG.

An IdP that refuses, answers something that is not an ID-JAG or garbage, an IdP endpoint aimed at a
private address or on plain http (SSRF, scheme), and the ID token in error messages and logs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcpmux.auth.login import _Flow, exchange_for_id_jag
from mcpmux.auth.netguard import policy_for
from mcpmux.auth.vault import FileVault
from mcpmux.config.models import IdentityProviderConfig, OAuthConfig, StreamableHttpServerConfig
from mcpmux.errors import OAuthError
from tests.peers.fixtures import run_listening

pytestmark = [pytest.mark.anyio]

HERE = Path(__file__).resolve().parents[1] / "auth"
ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2VjcmV0LWlkLXRva2VuLXNpZ25hdHVyZQ"
ISSUER = "http://127.0.0.1:1/"
RESOURCE = "http://127.0.0.1:1/mcp"


@pytest.fixture
def idp(request: pytest.FixtureRequest) -> Iterator[str]:
    with run_listening([sys.executable, str(HERE / "hostile_idp.py"), request.param]) as port:
        yield f"http://127.0.0.1:{port}/token"


def flow(tmp_path: Path, endpoint: str) -> _Flow:
    idp = IdentityProviderConfig(token_endpoint=endpoint, client_id="idp-client")
    auth = OAuthConfig(grant="jwt_bearer", client_id="c", assertion_env="X", identity_provider=idp)
    server = StreamableHttpServerConfig(name="corp", url=RESOURCE, auth=auth)
    return _Flow(server, FileVault(tmp_path), policy_for(server), None)


async def exchange(tmp_path: Path, endpoint: str) -> str:
    current = flow(tmp_path, endpoint)
    assert current.server.auth is not None and current.server.auth.identity_provider is not None
    with anyio.fail_after(30):
        return await exchange_for_id_jag(current, current.server.auth.identity_provider, ID_TOKEN, ISSUER, RESOURCE, ())


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("idp", "said"),
    [("refuse", "refused the token exchange (HTTP 400) invalid_grant"), ("not-a-jag", "not an ID-JAG"),
     ("garbage", "token exchange failed")],
    indirect=["idp"],
)  # fmt: skip
async def test_an_idp_that_refuses_or_answers_no_id_jag_ends_the_login_with_a_clear_error(
    idp: str, said: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(OAuthError) as refused:
        await exchange(tmp_path, idp)
    assert said in str(refused.value)
    assert ID_TOKEN not in str(refused.value) and ID_TOKEN not in caplog.text


@pytest.mark.subprocess
@pytest.mark.parametrize("idp", ["ok"], indirect=True)
async def test_a_well_formed_answer_gives_the_id_jag(idp: str, tmp_path: Path) -> None:
    assert (await exchange(tmp_path, idp)).count(".") == 2


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [("https://169.254.169.254/token", "SSRF"), ("https://10.0.0.7/token", "SSRF"),
     ("http://idp.example.com/token", "only https")],
)  # fmt: skip
async def test_an_idp_endpoint_on_a_private_address_or_plain_http_is_refused(
    endpoint: str, said: str, tmp_path: Path
) -> None:
    with pytest.raises(OAuthError, match=said) as refused:
        await exchange(tmp_path, endpoint)
    assert ID_TOKEN not in str(refused.value)


def test_an_identity_provider_needs_the_jwt_bearer_grant() -> None:
    idp = IdentityProviderConfig(token_endpoint="https://idp.example.com/token", client_id="x")
    with pytest.raises(ValueError, match="identity_provider"):
        OAuthConfig(identity_provider=idp)
