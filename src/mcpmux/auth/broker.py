"""The token broker: a server's access token, refreshed once per machine, attached only to that server.

Every mcpmux process of the machine shares one record per server (:mod:`mcpmux.auth.vault`). A token
that is about to expire, or that the server answered with 401, is refreshed under the record's
cross-process lock: the first process to take it re-reads the record, finds the token it holds still
current and refreshes it; every later one re-reads the record, finds a newer token than the one it
had, and uses that. So one rotating refresh token is used exactly once, and an authorization server
that revokes the whole token family on reuse never sees a reuse.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import httpx2
from pydantic import ValidationError

from mcpmux.auth.dpop import DPoPKey, asks_for_nonce
from mcpmux.auth.netguard import GuardedTransport, UrlPolicy
from mcpmux.auth.vault import AuthRecord, TokenSet, Vault, record_lock
from mcpmux.errors import OAuthError

__all__ = ["REFRESH_MARGIN_S", "BrokeredAuth", "TokenBroker", "origin_of", "token_set_from"]

logger = logging.getLogger(__name__)

REFRESH_MARGIN_S = 30.0
"""Refresh this long before expiry (a quarter of the lifetime for tokens shorter than two minutes)."""
TOKEN_REQUEST_TIMEOUT_S = 30.0


def origin_of(url: str | httpx2.URL) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, default ports normalised: tokens never leave their origin."""
    parsed = httpx2.URL(str(url))
    port = parsed.port or {"http": 80, "https": 443}.get(parsed.scheme)
    return parsed.scheme, parsed.host.lower(), port


def _due(tokens: TokenSet, now: float) -> bool:
    if tokens.expires_at is None:
        return False
    margin = REFRESH_MARGIN_S if tokens.lifetime_s is None else min(REFRESH_MARGIN_S, tokens.lifetime_s / 4)
    return now >= tokens.expires_at - margin


def token_set_from(body: dict[str, object], previous: TokenSet | None, now: float) -> TokenSet:
    """A :class:`TokenSet` from a token endpoint's JSON answer (RFC 6749 section 5.1).

    An answer without ``refresh_token`` or ``scope`` keeps the previous ones (section 6).
    """
    expires_in = body.get("expires_in")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) else None
    refresh = body.get("refresh_token")
    scope = body.get("scope")
    return TokenSet(
        access_token=str(body["access_token"]),
        token_type=str(body.get("token_type", "Bearer")),
        refresh_token=str(refresh) if refresh else (previous.refresh_token if previous else None),
        scope=str(scope) if scope else (previous.scope if previous else None),
        expires_at=None if lifetime is None else now + lifetime,
        lifetime_s=lifetime,
    )


class TokenBroker:
    """The tokens of one server, as every process of the machine sees them.

    Args:
        server: the configured server name.
        url: the server's configured URL; a stored record for another origin is never used.
        vault: the machine's store.
        policy: the URL checks for the token endpoint.
        verify_tls: verify certificates on token requests.
    """

    def __init__(self, server: str, url: str, vault: Vault, policy: UrlPolicy, *, verify_tls: bool = True) -> None:
        self.server, self.url, self.vault, self.policy = server, url, vault, policy
        self.verify_tls = verify_tls
        self.refreshes = 0
        self._record: AuthRecord | None = None
        self._local = anyio.Lock()
        self._dpop: tuple[str, DPoPKey] | None = None

    def dpop_key(self) -> DPoPKey | None:
        """The key the current tokens are bound to (RFC 9449), ``None`` for bearer tokens.

        One object per key, so the nonces servers hand out are kept from request to request.
        """
        pem = self._record.dpop_key if self._record is not None else None
        if pem is None:
            return None
        if self._dpop is None or self._dpop[0] != pem:
            self._dpop = (pem, DPoPKey.from_pem(pem))
        return self._dpop[1]

    async def _load(self) -> AuthRecord | None:
        record = await anyio.to_thread.run_sync(self.vault.load, self.server)
        if record is not None and origin_of(record.resource) != origin_of(self.url):
            logger.warning(
                "oauth: the stored login of server %r is for another origin (%s); it is not used here",
                self.server,
                httpx2.URL(record.resource).copy_with(path="/", query=None),
            )
            return None
        self._record = record
        return record

    async def token(self) -> str | None:
        """A current access token, refreshed first when due; ``None`` when there is no login.

        Raises:
            OAuthError: the token was due and could not be refreshed.
        """
        record = self._record if self._record is not None and self._record.tokens else await self._load()
        if record is None:
            return None
        if record.tokens is None:
            return await self.refresh(None) if record.grant == "client_credentials" else None
        if not _due(record.tokens, time.time()):
            return record.tokens.access_token
        return await self.refresh(stale=record.tokens.access_token)

    async def refresh(self, stale: str | None) -> str | None:
        """A token newer than ``stale``: another process's, or one refreshed here, once, under the lock.

        Raises:
            OAuthError: the refresh was refused (the login is then dropped) or failed.
            TimeoutError: another process held the lock too long.
        """
        async with self._local, record_lock(self.server):
            record = await self._load()
            if record is None or (record.tokens is None and record.grant != "client_credentials"):
                return None
            tokens = record.tokens
            if tokens is not None and tokens.access_token != stale and not _due(tokens, time.time()):
                return tokens.access_token
            fresh = await self._grant(record)
            updated = record.model_copy(update={"tokens": fresh, "updated_at": time.time()})
            await anyio.to_thread.run_sync(self.vault.save, updated)
            self._record = updated
            self.refreshes += 1
            return fresh.access_token

    def forget(self) -> None:
        """Drop the cached record: the next token is read from the store (a login just replaced it)."""
        self._record = None

    async def note_scope(self, scope: str) -> None:
        """Remember a scope the server asked for (403 ``insufficient_scope``): the next login asks the union."""
        async with self._local, record_lock(self.server):
            record = await self._load()
            if record is None:
                return
            have = (record.wanted_scope or (record.tokens.scope if record.tokens else "") or "").split()
            union = " ".join(dict.fromkeys([*have, *scope.split()]))
            if union != record.wanted_scope:
                await anyio.to_thread.run_sync(self.vault.save, record.model_copy(update={"wanted_scope": union}))

    async def _grant(self, record: AuthRecord) -> TokenSet:
        endpoint = record.token_endpoint
        client = record.client or {}
        if endpoint is None or "client_id" not in client:
            raise OAuthError(self.server, self.url, "the stored login has no token endpoint or client; log in again")
        form: dict[str, str] = {"client_id": str(client["client_id"]), "resource": record.resource}
        if record.grant == "client_credentials" and client.get("token_endpoint_auth_method") == "private_key_jwt":
            # Each token request needs a freshly signed assertion: the login (bootstrap) does it.
            raise OAuthError(self.server, self.url, "the client-credentials token expired; a new assertion is due")
        if record.grant == "jwt_bearer" and not (record.tokens is not None and record.tokens.refresh_token):
            # The workload's current JWT is the grant: the login (bootstrap) reads it and asks again.
            raise OAuthError(self.server, self.url, "the jwt-bearer token expired; a new workload assertion is due")
        if record.grant == "client_credentials":
            form["grant_type"] = "client_credentials"
            if record.wanted_scope:
                form["scope"] = record.wanted_scope
        elif record.tokens is not None and record.tokens.refresh_token:
            form.update(grant_type="refresh_token", refresh_token=record.tokens.refresh_token)
        else:
            raise OAuthError(self.server, self.url, "the access token expired and there is no refresh token")
        body = await self._post(endpoint, form, client, record)
        try:
            return token_set_from(body, record.tokens, time.time())
        except (KeyError, ValueError, ValidationError) as exc:
            raise OAuthError(self.server, endpoint, f"the token endpoint's answer is not a token ({exc})") from exc

    async def _post(
        self, endpoint: str, form: dict[str, str], client: dict[str, object], record: AuthRecord
    ) -> dict[str, object]:
        method = client.get("token_endpoint_auth_method")
        secret = client.get("client_secret")
        auth: httpx2.BasicAuth | None = None
        if isinstance(secret, str) and method == "client_secret_basic":
            auth = httpx2.BasicAuth(form["client_id"], secret)
        elif isinstance(secret, str) and method in ("client_secret_post", None):
            form["client_secret"] = secret
        transport = GuardedTransport(httpx2.AsyncHTTPTransport(verify=self.verify_tls), self.policy)
        key = self.dpop_key()
        async with httpx2.AsyncClient(transport=transport, timeout=TOKEN_REQUEST_TIMEOUT_S) as http:
            try:
                for _ in range(2):  # once more with the nonce a DPoP authorization server asks for
                    headers = {"Accept": "application/json"}
                    if key is not None:
                        headers["DPoP"] = key.proof("POST", endpoint)
                    response = await http.post(
                        endpoint, data=form, auth=auth or httpx2.USE_CLIENT_DEFAULT, headers=headers
                    )
                    nonce = asks_for_nonce(response, response.content) if key is not None else None
                    if key is None or nonce is None:
                        break
                    key.remember_nonce(endpoint, nonce)
            except httpx2.HTTPError as exc:
                raise OAuthError(self.server, endpoint, f"token request failed: {exc!r}") from exc
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code == 200 and isinstance(body, dict):
            return body
        error = body.get("error") if isinstance(body, dict) else None
        if error == "invalid_grant":
            # The refresh token is dead (revoked, expired or its family revoked): forget the tokens, keep
            # the client registration for the next login.
            dropped = record.model_copy(update={"tokens": None, "updated_at": time.time()})
            await anyio.to_thread.run_sync(self.vault.save, dropped)
            self._record = dropped
            raise OAuthError(
                self.server, endpoint, "the authorization server refused the refresh token (revoked or expired)"
            )
        reason = f"token request answered HTTP {response.status_code} ({error or 'no error code'})"
        raise OAuthError(self.server, endpoint, reason)


class BrokeredAuth(httpx2.Auth):
    """``httpx2`` auth for one server's MCP traffic: its broker's token, sent only to its own origin.

    A 401 triggers one refresh and one retry; a 403 ``insufficient_scope`` records the scope asked
    for. What is still refused goes on as the server's answer (the transport makes it ``AuthRequired``,
    the server ``needs-auth``).
    """

    def __init__(
        self,
        broker: TokenBroker,
        bootstrap: Callable[[], Awaitable[object]] | None = None,
        interactive: Callable[[httpx2.Request, httpx2.Response], Awaitable[object]] | None = None,
    ) -> None:
        self.broker = broker
        self._origin = origin_of(broker.url)
        self._bootstrap = bootstrap
        self._interactive = interactive

    async def _quietly(self, stale: str | None, *, refresh: bool) -> str | None:
        try:
            return await (self.broker.refresh(stale) if refresh else self.broker.token())
        except (OAuthError, TimeoutError) as exc:
            logger.warning("%s", exc)
            return None

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if origin_of(request.url) != self._origin:
            yield request  # a redirect or link to another origin never carries this server's token
            return
        token = await self._quietly(None, refresh=False)
        if token is not None:
            self._present(request, token)
        response = yield request
        if token is not None and self._wants_nonce(request, response):
            self._present(request, token)  # the same token, a new proof carrying the server's nonce
            response = yield request
        fresh: str | None = None
        if response.status_code == 401:
            fresh = await self._quietly(token, refresh=True)
            if fresh is None and self._bootstrap is not None:
                fresh = await self._first_token()
            if fresh is None and self._interactive is not None:
                fresh = await self._log_in(request, response)
        elif response.status_code == 403:
            challenge = response.headers.get("WWW-Authenticate", "")
            scope = _challenge_field(challenge, "scope")
            if "insufficient_scope" in challenge and scope:
                await self.broker.note_scope(scope)
                if self._interactive is not None:
                    fresh = await self._log_in(request, response)
        if fresh is not None and fresh != token:
            self._present(request, fresh)
            response = yield request
            if self._wants_nonce(request, response):
                self._present(request, fresh)
                yield request

    def _wants_nonce(self, request: httpx2.Request, response: httpx2.Response) -> bool:
        """Keep the nonce a DPoP server hands out; whether it refused the request for want of it (RFC 9449 s9)."""
        key = self.broker.dpop_key()
        if key is None:
            return False
        nonce = asks_for_nonce(response)
        if nonce is None and response.headers.get("DPoP-Nonce"):
            key.remember_nonce(request.url, response.headers["DPoP-Nonce"])
        if nonce is None:
            return False
        key.remember_nonce(request.url, nonce)
        return True

    def _present(self, request: httpx2.Request, token: str) -> None:
        """``Authorization`` for ``token``: ``DPoP`` with a fresh proof when it is bound to a key, else ``Bearer``."""
        key = self.broker.dpop_key()
        if key is None:
            request.headers["Authorization"] = f"Bearer {token}"
            request.headers.pop("DPoP", None)
            return
        request.headers["Authorization"] = f"DPoP {token}"
        request.headers["DPoP"] = key.proof(request.method, request.url, access_token=token)

    async def _log_in(self, request: httpx2.Request, response: httpx2.Response) -> str | None:
        """Where a person is at hand (a face enabled it), log in from this answer, once per answer."""
        assert self._interactive is not None
        await response.aread()
        try:
            await self._interactive(request, response)
            self.broker.forget()
            return await self.broker.token()
        except (OAuthError, TimeoutError) as exc:
            logger.warning("%s", exc)
            return None

    async def _first_token(self) -> str | None:
        """Machine-to-machine servers log in by themselves (client credentials, no person involved)."""
        assert self._bootstrap is not None
        try:
            await self._bootstrap()
            return await self.broker.token()
        except (OAuthError, TimeoutError) as exc:
            logger.warning("%s", exc)
            return None


def _challenge_field(challenge: str, name: str) -> str | None:
    import re

    found = re.search(rf'{name}="([^"]*)"|{name}=([^\s,]+)', challenge)
    return None if found is None else found.group(1) or found.group(2)
