"""Attacks on mcpmux's OAuth client, acted out against real servers on 127.0.0.1.

A hostile MCP server (or one whose metadata was tampered with) tries to make mcpmux fetch internal
URLs (SSRF: a cloud metadata address, a private host), talk plain http to an authorization server off
loopback, accept metadata of another issuer, or a forged redirect; and a token must never travel to
another origin than the server it was issued for.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from mcpmux.auth.broker import BrokeredAuth, TokenBroker
from mcpmux.auth.dpop import DPoPKey
from mcpmux.auth.login import login, read_assertion
from mcpmux.auth.netguard import UrlPolicy
from mcpmux.auth.vault import AuthRecord, TokenSet, open_vault
from mcpmux.config.models import OAuthConfig, StreamableHttpServerConfig
from mcpmux.errors import OAuthError
from tests.auth.world import OAuthWorld, oauth_world, scripted_browser

pytestmark = [pytest.mark.anyio]


def real(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Marks a test that runs the real authorization and resource servers."""
    return pytest.mark.peers(pytest.mark.subprocess(pytest.mark.network(test)))


DEADLINE_S = 60


@pytest.fixture(autouse=True)
def file_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPMUX_TOKEN_STORE", "file")


async def attempt_login(world: OAuthWorld) -> OAuthError:
    server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)
    with anyio.fail_after(DEADLINE_S), pytest.raises(OAuthError) as caught:
        await login(server, open_vault(), browser=lambda url: scripted_browser(url, world))
    assert not world.visited, "no person may be sent anywhere by a refused flow"
    return caught.value


@real
@pytest.mark.parametrize(("mode", "target"), [("ssrf", "169.254.169.254"), ("ssrf-header", "10.0.0.7")])
async def test_metadata_pointing_at_a_private_or_link_local_address_is_refused(mode: str, target: str) -> None:
    with oauth_world(mode) as world:
        error = await attempt_login(world)
        assert target in str(error)
        assert "SSRF guard" in str(error)
        assert "allow_private_addresses" in str(error.hint)


@real
async def test_an_authorization_server_on_plain_http_off_loopback_is_refused() -> None:
    with oauth_world("http-as") as world:
        error = await attempt_login(world)
        assert "only https is allowed" in str(error)
        assert "auth.example.com" in str(error)


@real
async def test_metadata_naming_another_issuer_is_refused() -> None:
    with oauth_world("wrong-issuer") as world:
        error = await attempt_login(world)
        assert "issuer mismatch" in str(error)
        assert "impostor.example.com" in str(error)


@real
async def test_a_forged_redirect_with_another_state_is_refused() -> None:
    """A page the person visits fires the loopback redirect with an attacker's code (login CSRF)."""
    with oauth_world("normal") as world:
        server = StreamableHttpServerConfig(name="notes", url=world.mcp_url)

        async def attacker(url: str) -> None:
            redirect = httpx2.URL(url).params["redirect_uri"]
            async with httpx2.AsyncClient() as browser:
                await browser.get(redirect, params={"code": "attacker-code", "state": "forged"})

        with anyio.fail_after(DEADLINE_S), pytest.raises(OAuthError) as caught:
            await login(server, open_vault(), browser=attacker)
        assert "State parameter mismatch" in str(caught.value)
        record = open_vault().load("notes")
        assert record is None or record.tokens is None
        assert world.as_stats()["authorization_code"] == 0  # the attacker's code never reached the token endpoint


async def test_the_token_is_never_sent_to_another_origin() -> None:
    vault = open_vault()
    tokens = TokenSet(access_token="secret-access-token-xyz", expires_at=None)
    vault.save(AuthRecord(server="notes", resource="https://mcp.example.com/mcp", tokens=tokens))
    broker = TokenBroker("notes", "https://mcp.example.com/mcp", vault, UrlPolicy("notes", "mcp.example.com"))
    seen: dict[str, str | None] = {}

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen[str(request.url)] = request.headers.get("authorization")
        return httpx2.Response(200)

    async with httpx2.AsyncClient(auth=BrokeredAuth(broker), transport=httpx2.MockTransport(answer)) as http:
        for url in (
            "https://mcp.example.com/mcp",
            "https://evil.example.com/mcp",
            "http://mcp.example.com/mcp",
            "https://mcp.example.com:8443/mcp",
        ):
            await http.post(url)
    assert seen == {
        "https://mcp.example.com/mcp": "Bearer secret-access-token-xyz",
        "https://evil.example.com/mcp": None,
        "http://mcp.example.com/mcp": None,
        "https://mcp.example.com:8443/mcp": None,
    }


async def test_a_login_stored_for_another_origin_is_not_used_when_the_url_changes() -> None:
    vault = open_vault()
    tokens = TokenSet(access_token="token-for-the-old-host", expires_at=None)
    vault.save(AuthRecord(server="notes", resource="https://old.example.com/mcp", tokens=tokens))
    broker = TokenBroker("notes", "https://new.example.net/mcp", vault, UrlPolicy("notes", "new.example.net"))
    assert await broker.token() is None


# --- DPoP (RFC 9449) and the jwt-bearer grant (RFC 7523) ---------------------------------------


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verified_proof(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and claims of a DPoP proof whose ES256 signature verifies with the key it names."""
    head, body, signature = proof.split(".")
    header, claims = json.loads(_b64decode(head)), json.loads(_b64decode(body))
    jwk = header["jwk"]
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_b64decode(jwk["x"]), "big"), int.from_bytes(_b64decode(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()
    raw = _b64decode(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    return header, claims


def test_a_dpop_proof_names_only_its_request_and_carries_no_private_key() -> None:
    key = DPoPKey.generate()
    proof = key.proof("post", "https://mcp.example/mcp?session=1#frag", access_token="tok")
    header, claims = verified_proof(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}, "the proof must never carry the private key (d)"
    assert claims["htm"] == "POST" and claims["htu"] == "https://mcp.example/mcp"
    expected_ath = base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert claims["ath"] == expected_ath
    # A forged proof (claims changed after signing) does not verify.
    head, _, signature = proof.split(".")
    forged = {**claims, "htu": "https://attacker.example/mcp"}
    forged_body = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidSignature):
        verified_proof(f"{head}.{forged_body}.{signature}")


def test_every_dpop_proof_is_fresh_so_a_captured_one_cannot_be_replayed_as_ours() -> None:
    key = DPoPKey.generate()
    jtis = {verified_proof(key.proof("POST", "https://mcp.example/mcp"))[1]["jti"] for _ in range(50)}
    assert len(jtis) == 50


def test_a_dpop_nonce_is_sent_only_to_the_origin_that_gave_it() -> None:
    key = DPoPKey.generate()
    key.remember_nonce("https://as.example/token", "n-as")
    assert verified_proof(key.proof("POST", "https://as.example/token"))[1]["nonce"] == "n-as"
    assert "nonce" not in verified_proof(key.proof("POST", "https://mcp.example/mcp"))[1]


def _dpop_broker(tmp_path: Any) -> TokenBroker:
    vault = open_vault()
    record = AuthRecord(
        server="notes",
        resource="https://mcp.example/mcp",
        tokens=TokenSet(access_token="bound-token", token_type="DPoP"),
        dpop_key=DPoPKey.generate().to_pem(),
    )
    vault.save(record)
    return TokenBroker("notes", "https://mcp.example/mcp", vault, UrlPolicy("notes", "mcp.example"))


async def test_a_dpop_bound_token_is_never_presented_as_bearer_and_a_nonce_loop_is_cut(tmp_path: Any) -> None:
    broker = _dpop_broker(tmp_path)
    seen: list[tuple[str, str]] = []

    def hostile(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.headers["Authorization"], request.headers["DPoP"]))  # asks for a new nonce, forever
        challenge = 'DPoP error="use_dpop_nonce"'
        return httpx2.Response(401, headers={"WWW-Authenticate": challenge, "DPoP-Nonce": f"n{len(seen)}"})

    async with httpx2.AsyncClient(auth=BrokeredAuth(broker), transport=httpx2.MockTransport(hostile)) as http:
        with anyio.fail_after(DEADLINE_S):
            response = await http.post("https://mcp.example/mcp", json={})
    assert response.status_code == 401
    assert len(seen) == 2, "one retry with the server's nonce, no more"
    proofs = [verified_proof(proof)[1] for _, proof in seen]
    assert all(authorization == "DPoP bound-token" for authorization, _ in seen)
    assert proofs[0]["jti"] != proofs[1]["jti"] and proofs[1]["nonce"] == "n1"


async def test_a_workload_token_that_is_not_a_jwt_is_refused_without_echoing_it(tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("not a jwt but maybe a secret\n")
    auth = OAuthConfig(grant="jwt_bearer", assertion_file=str(token_file))
    with pytest.raises(OAuthError) as caught:
        await read_assertion("notes", "https://mcp.example/mcp", auth)
    assert "is not a JWT" in str(caught.value) and "secret" not in str(caught.value)
    with pytest.raises(OAuthError, match="cannot read the workload token"):
        await read_assertion("notes", "https://mcp.example/mcp", auth.model_copy(update={"assertion_file": "/nope"}))


@real
@pytest.mark.timeout(300)
@pytest.mark.parametrize("assertion", ["wrong_audience_jwt", "expired_jwt"])
def test_a_jwt_bearer_assertion_for_another_audience_or_expired_is_refused_once_and_never_retried(
    tmp_path: Any, assertion: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conformance.test_conformance import RUNS, run_suite, scenario_checks

    monkeypatch.setenv("MCPMUX_CONFORMANCE_ASSERTION", assertion)
    run = run_suite(tmp_path, "--scenario", "auth/wif-jwt-bearer", run=RUNS["0.2"])
    checks = scenario_checks(tmp_path)["auth/wif-jwt-bearer"]
    ids = {check["id"]: check["status"] for check in checks}
    expected = "wif-assertion-audience" if assertion == "wrong_audience_jwt" else "wif-assertion-expired"
    assert ids.get(expected) == "FAILURE", f"the authorization server did not see the bad assertion: {ids}"
    # Refused: no retry with the same assertion, no switch to another grant, no token used.
    assert "wif-no-retry" not in ids and "wif-grant-fallback" not in ids, ids
    assert "valid-bearer-token" not in ids, ids
    assert "Error" in run.stdout + run.stderr or run.returncode != 0
