"""``mcpmux login``: obtain a server's first tokens with the official SDK's OAuth client.

The SDK's :class:`~mcp.client.auth.OAuthClientProvider` does the protocol: on the server's 401 it
discovers the protected resource metadata (RFC 9728: the header's ``resource_metadata``, then the
well-known paths), the authorization server metadata (RFC 8414, then OpenID discovery, in the
spec's order, issuer checked), chooses the client identity (a pre-registered ``client_id``, a Client
ID Metadata Document where the server supports it, else dynamic registration), runs the code flow
with PKCE S256, checks ``state`` and the RFC 9207 ``iss``, and sends the resource indicator. What is
ours: the loopback redirect and the copy-paste fallback, the URL rules of :mod:`mcpmux.auth.netguard`
on every request of the flow, keeping the registration (never registering twice), the scope union of
a step-up, and the record the broker then refreshes for every process of the machine.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import warnings
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl

from mcpmux._private.mcp_sdk import GrantProvider
from mcpmux.auth.broker import token_set_from
from mcpmux.auth.dpop import DPoPKey, DPoPTokenTransport, challenges_with_dpop
from mcpmux.auth.loopback import LoopbackRedirect, parse_redirect
from mcpmux.auth.netguard import GuardedTransport, UrlPolicy, policy_for
from mcpmux.auth.vault import AuthRecord, Vault
from mcpmux.config.models import IdentityProviderConfig, OAuthConfig, SseServerConfig, StreamableHttpServerConfig
from mcpmux.errors import OAuthError

__all__ = [
    "LOGIN_TIMEOUT_S",
    "Browser",
    "Challenge",
    "Paste",
    "exchange_for_id_jag",
    "login",
    "open_browser",
    "read_assertion",
]

logger = logging.getLogger(__name__)

LOGIN_TIMEOUT_S = 300.0
"""How long a person has to finish the login in the browser."""
CLIENT_NAME = "mcpmux"
PROTOCOL_VERSION = "2025-11-25"

HttpServer = StreamableHttpServerConfig | SseServerConfig
Browser = Callable[[str], Awaitable[None]]
"""Shows the authorization URL to a person (opens a browser, prints it, or a test follows it)."""
Challenge = tuple[httpx2.Request, httpx2.Response]
"""A request of a session and the 401/403 answer (body read) that calls for a login."""
Paste = Callable[[], Awaitable[str]]
"""Reads the redirect URL a person pasted (headless machines: the browser is elsewhere)."""


async def open_browser(url: str) -> None:
    """Open ``url`` in the desktop's browser (does nothing visible where there is none)."""
    await anyio.to_thread.run_sync(webbrowser.open, url)


class _ScopeNotRegistered(OAuthFlowError):
    """The authorization server refused the scope asked for (``invalid_scope``) of a registered client."""


class _Storage:
    """The SDK's ``TokenStorage``: starts with the kept client, never with old tokens (a login is fresh)."""

    def __init__(
        self, client: OAuthClientInformationFull | None, keep: Callable[[OAuthClientInformationFull], Awaitable[None]]
    ) -> None:
        self.client, self._keep = client, keep
        self.tokens: OAuthToken | None = None
        self.tokens_at = 0.0

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens, self.tokens_at = tokens, time.time()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
        await self._keep(client_info)  # kept at once: a login that fails later never registers again


@dataclass
class _Flow:
    server: HttpServer
    vault: Vault
    policy: UrlPolicy
    wanted_scope: str | None
    challenge: Challenge | None = None
    dpop: DPoPTokenTransport | None = None

    def record(self, **changes: object) -> AuthRecord:
        record = self.vault.load(self.server.name)
        if record is None:
            record = AuthRecord(server=self.server.name, resource=self.server.url)
        base = record
        return base.model_copy(update={**changes, "updated_at": time.time()})

    async def keep_client(self, client: OAuthClientInformationFull) -> None:
        stored = self.record(client=client.model_dump(mode="json", exclude_none=True))
        await anyio.to_thread.run_sync(self.vault.save, stored)

    def stored_client(self) -> OAuthClientInformationFull | None:
        auth = self.server.auth or OAuthConfig()
        if auth.client_id is not None:
            secret = auth.client_secret.get_secret_value() if auth.client_secret else None
            return OAuthClientInformationFull(
                client_id=auth.client_id,
                client_secret=secret,
                token_endpoint_auth_method="client_secret_basic" if secret else "none",
                redirect_uris=None,
            )
        record = self.vault.load(self.server.name)
        if record is None or record.client is None:
            return None
        return OAuthClientInformationFull.model_validate(record.client)

    def scoped(self, url: str) -> str:
        """The authorization URL with the step-up union of scopes (what was granted plus what was asked)."""
        self.policy.check_scheme(httpx2.URL(url))
        if not self.wanted_scope:
            return url
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        query["scope"] = " ".join(dict.fromkeys([*query.get("scope", "").split(), *self.wanted_scope.split()]))
        return urlunsplit(parts._replace(query=urlencode(query)))


def _redirect_port(client: OAuthClientInformationFull | None, configured: int) -> int:
    """The port registered before (loopback redirects should keep it), else the configured one, else free."""
    uris = client.redirect_uris if client is not None else None
    if uris:
        port = urlsplit(str(uris[0])).port
        if port:
            return port
    return configured


async def login(
    server: HttpServer,
    vault: Vault,
    *,
    browser: Browser | None = None,
    paste: Paste | None = None,
    timeout_s: float = LOGIN_TIMEOUT_S,
    challenge: Challenge | None = None,
) -> AuthRecord:
    """Log in to ``server`` and store the record every mcpmux process of the machine then uses.

    Args:
        server: an http or sse server; its ``auth`` block says how (code flow unless ``client_credentials``).
        vault: the machine's store.
        browser: shows the authorization URL (default: open the desktop browser).
        paste: reads a pasted redirect URL, raced against the loopback redirect (headless use).
        timeout_s: how long the person has.
        challenge: the request a session sent and the 401 or 403 it got; the flow starts from that
            answer instead of probing the server (which may protect only some methods or tools).

    Raises:
        OAuthError: discovery, registration, authorization or token exchange failed or was refused.
    """
    auth = server.auth or OAuthConfig()
    previous = await anyio.to_thread.run_sync(vault.load, server.name)
    wanted = previous.wanted_scope if previous is not None else None
    flow = _Flow(server, vault, policy_for(server), " ".join(auth.scopes) or wanted, challenge)
    try:
        if auth.grant == "client_credentials":
            record = await _client_credentials(flow, auth)
        elif auth.grant == "jwt_bearer":
            record = await _jwt_bearer(flow, auth)
        else:
            try:
                record = await _authorization_code(flow, auth, browser or open_browser, paste, timeout_s)
            except _ScopeNotRegistered:
                if auth.client_id is not None or auth.client_metadata_url is not None:
                    raise
                # Authorization servers such as oidc-provider bind a dynamically registered client to
                # the scopes it registered with: a step-up beyond them needs a registration that
                # names them. Once, and only then, is the kept registration replaced.
                logger.info("oauth: server %r: registering again for the wider scope", server.name)
                await anyio.to_thread.run_sync(vault.save, flow.record(client=None))
                record = await _authorization_code(flow, auth, browser or open_browser, paste, timeout_s)
    except OAuthFlowError as exc:
        raise OAuthError(server.name, server.url, str(exc)) from exc
    await anyio.to_thread.run_sync(vault.save, record)
    return record


async def _authorization_code(
    flow: _Flow, auth: OAuthConfig, browser: Browser, paste: Paste | None, timeout_s: float
) -> AuthRecord:
    client = flow.stored_client()
    async with LoopbackRedirect.open(_redirect_port(client, auth.redirect_port)) as redirect:
        if client is not None and client.redirect_uris is None and auth.client_id is not None:
            client = client.model_copy(update={"redirect_uris": [AnyUrl(redirect.redirect_uri)]})
        storage = _Storage(client, flow.keep_client)
        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[AnyUrl(redirect.redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            application_type="native",
            scope=" ".join(auth.scopes) or None,
        )

        async def show(url: str) -> None:
            await browser(flow.scoped(url))

        async def callback() -> AuthorizationCodeResult:
            params = await _first_redirect(redirect, paste, timeout_s, flow)
            if params.get("error") == "invalid_scope" and flow.wanted_scope:
                raise _ScopeNotRegistered(f"the authorization server refused the scope {flow.wanted_scope!r}")
            if "error" in params:
                detail = params.get("error_description", "")
                raise OAuthFlowError(f"the authorization server refused: {params['error']} {detail}".strip())
            if "code" not in params:
                raise OAuthFlowError("the redirect carried no authorization code")
            return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

        provider = OAuthClientProvider(
            flow.server.url,
            metadata,
            storage,
            redirect_handler=show,
            callback_handler=callback,
            client_metadata_url=auth.client_metadata_url,
        )
        await _probe(flow, provider)
        return _finish(flow, provider, storage, "authorization_code")


async def _client_credentials(flow: _Flow, auth: OAuthConfig) -> AuthRecord:
    assert auth.client_id is not None, "checked by OAuthConfig"
    storage = _Storage(None, flow.keep_client)
    scope = " ".join(auth.scopes) or None
    provider: OAuthClientProvider
    with warnings.catch_warnings():
        # Without `issuer` the SDK warns that the MCP server picks the authorization server; the
        # URL rules still apply to whatever it picks.
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if auth.private_key is not None:
            signer = SignedJWTParameters(
                issuer=auth.client_id,
                subject=auth.client_id,
                signing_key=auth.private_key.get_secret_value(),
                signing_algorithm=auth.signing_algorithm,
            )
            provider = PrivateKeyJWTOAuthProvider(
                flow.server.url,
                storage,
                auth.client_id,
                signer.create_assertion_provider(),
                scope=scope,
                issuer=auth.issuer,
            )
        else:
            assert auth.client_secret is not None, "checked by OAuthConfig"
            provider = ClientCredentialsOAuthProvider(
                flow.server.url,
                storage,
                auth.client_id,
                auth.client_secret.get_secret_value(),
                scope=scope,
                issuer=auth.issuer,
            )
    await _probe(flow, provider)
    return _finish(flow, provider, storage, "client_credentials")


async def _jwt_bearer(flow: _Flow, auth: OAuthConfig) -> AuthRecord:
    """RFC 7523 section 2.1: the workload's JWT (from its file or variable, read now) is the grant.

    A refusal (``invalid_grant``, ``invalid_scope``, ``unauthorized_client``) ends the login: it is not
    retried, nor another grant tried (the workload's identity is the only credential it has).
    """
    client_id = auth.client_id or "mcpmux"
    client = OAuthClientInformationFull(
        client_id=client_id,
        client_secret=auth.client_secret.get_secret_value() if auth.client_secret else None,
        token_endpoint_auth_method="client_secret_basic" if auth.client_secret else "none",
        grant_types=[JWT_BEARER_GRANT_TYPE],
        redirect_uris=None,
    )

    async def grant_form() -> dict[str, str]:
        assertion = await read_assertion(flow.server.name, flow.server.url, auth)
        if auth.identity_provider is not None:
            metadata = provider.context.oauth_metadata
            issuer = str(metadata.issuer) if metadata is not None else flow.server.url
            resource = provider.context.get_resource_url()
            assertion = await exchange_for_id_jag(
                flow, auth.identity_provider, assertion, issuer, resource, auth.scopes
            )
        return {"grant_type": JWT_BEARER_GRANT_TYPE, "assertion": assertion}

    storage = _Storage(None, flow.keep_client)
    provider = GrantProvider(flow.server.url, storage, client, grant_form, scope=" ".join(auth.scopes) or None)
    await _probe(flow, provider)
    return _finish(flow, provider, storage, "jwt_bearer")


TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


async def exchange_for_id_jag(
    flow: _Flow, idp: IdentityProviderConfig, id_token: str, issuer: str, resource: str, scopes: tuple[str, ...]
) -> str:
    """SEP-990: exchange the IdP's ID token (RFC 8693) for an ID-JAG for ``issuer`` and ``resource``.

    The IdP's endpoint is held to the server's URL rules (https, SSRF guard); a refusal ends the login.

    Raises:
        OAuthError: the exchange failed or was refused, or its answer is not an ID-JAG.
    """
    url = httpx2.URL(idp.token_endpoint)
    form = {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "requested_token_type": ID_JAG_TYPE,
        "audience": issuer,
        "resource": resource,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
    }
    if scopes:
        form["scope"] = " ".join(scopes)
    secret = idp.client_secret.get_secret_value() if idp.client_secret is not None else None
    headers = {"Accept": "application/json"}
    if secret is None:
        form["client_id"] = idp.client_id
    else:
        # RFC 6749 section 2.3.1: client_secret_basic form-encodes both parts first.
        pair = f"{quote(idp.client_id, safe='')}:{quote(secret, safe='')}".encode()
        headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
    transport = GuardedTransport(httpx2.AsyncHTTPTransport(verify=flow.server.verify_tls), flow.policy)
    where = str(url.copy_with(query=None))
    try:
        async with httpx2.AsyncClient(transport=transport, timeout=30.0, follow_redirects=False) as http:
            response = await http.post(url, data=form, headers=headers)
        answer = response.json() if response.content else {}
    except (httpx2.HTTPError, ValueError) as exc:
        raise OAuthError(flow.server.name, where, f"the identity provider's token exchange failed: {exc!r}") from exc
    if response.status_code != 200 or not isinstance(answer, dict):
        error = answer.get("error", "") if isinstance(answer, dict) else ""
        detail = answer.get("error_description", "") if isinstance(answer, dict) else ""
        reason = f"the identity provider refused the token exchange (HTTP {response.status_code}) {error} {detail}"
        raise OAuthError(flow.server.name, where, reason.strip(), hint="sign in to the identity provider again")
    jag = answer.get("access_token")
    if answer.get("issued_token_type") != ID_JAG_TYPE or not isinstance(jag, str) or jag.count(".") != 2:
        reason = (
            f"the identity provider's answer is not an ID-JAG (issued_token_type {answer.get('issued_token_type')!r})"
        )
        raise OAuthError(flow.server.name, where, reason)
    return jag


async def read_assertion(server: str, url: str, auth: OAuthConfig) -> str:
    """The workload's JWT, from ``assertion_file`` or ``assertion_env`` (read each time: it rotates).

    Raises:
        OAuthError: the file or variable is missing or empty, or does not hold a JWT.
    """
    if auth.assertion_file is not None:
        where = f"assertion_file {auth.assertion_file}"
        try:
            text = await (await anyio.Path(auth.assertion_file).expanduser()).read_text()
        except OSError as exc:
            raise OAuthError(server, url, f"cannot read the workload token ({where}): {exc.strerror}") from exc
    else:
        where = f"environment variable {auth.assertion_env}"
        text = os.environ.get(auth.assertion_env or "", "")
    token = text.strip()
    if token.count(".") != 2 or any(ch.isspace() for ch in token):
        raise OAuthError(
            server, url, f"the workload token ({where}) is not a JWT", hint="point it at the identity provider's token"
        )
    return token


async def _first_redirect(
    redirect: LoopbackRedirect, paste: Paste | None, timeout_s: float, flow: _Flow
) -> dict[str, str]:
    result: dict[str, str] = {}
    with anyio.move_on_after(timeout_s) as scope:
        async with anyio.create_task_group() as tg:

            async def from_loopback() -> None:
                result.update(await redirect.results.receive())
                tg.cancel_scope.cancel()

            async def from_paste() -> None:
                assert paste is not None
                result.update(parse_redirect(await paste()))
                tg.cancel_scope.cancel()

            tg.start_soon(from_loopback)
            if paste is not None:
                tg.start_soon(from_paste)
    if scope.cancelled_caught and not result:
        reason = f"no login within {timeout_s:.0f} s"
        raise OAuthError(flow.server.name, flow.server.url, reason, hint="run the login again")
    return result


class _WiderRegistration(httpx2.AsyncBaseTransport):
    """Registers a client that later step-ups can use: without ``scope``, or with the step-up's union.

    The SDK registers with the scope of the first challenge, and authorization servers such as
    oidc-provider then bind the client to it: every step-up (``insufficient_scope``) was refused
    (``invalid_scope``) and registered a new client, orphaning the old one. RFC 7591 lets a client
    omit ``scope``: the first registration does, and the authorization request still asks only for
    what is needed. Only a registration forced by a refusal anyway (a server that registers default
    scopes when none is named) names the union it needs.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, wanted: str | None) -> None:
        self._inner, self._wanted = inner, wanted

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and request.headers.get("content-type") == "application/json":
            body = json.loads(await request.aread())
            if isinstance(body, dict) and "redirect_uris" in body and "grant_types" in body:
                registration = {key: value for key, value in body.items() if key != "scope"}
                if self._wanted:
                    scopes = [*str(body.get("scope") or "").split(), *self._wanted.split()]
                    registration["scope"] = " ".join(dict.fromkeys(scopes))
                headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
                request = httpx2.Request("POST", request.url, headers=headers, json=registration)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


MAX_FLOW_STEPS = 16


async def _probe(flow: _Flow, provider: OAuthClientProvider) -> None:
    """Start the SDK's flow: from the session's challenge, else from one request to the server."""
    server = flow.server
    wanted_dpop = (server.auth or OAuthConfig()).dpop
    asked = flow.challenge is not None and challenges_with_dpop(flow.challenge[1])
    flow.dpop = DPoPTokenTransport(
        httpx2.AsyncHTTPTransport(verify=server.verify_tls), _dpop_key(flow), enabled=wanted_dpop, asked=asked
    )
    inner = _WiderRegistration(flow.dpop, flow.wanted_scope)
    transport = GuardedTransport(inner, flow.policy)
    if flow.challenge is not None:
        await _from_challenge(provider, transport, *flow.challenge)
        return
    headers = {key: value.get_secret_value() for key, value in server.headers.items() if key.lower() != "authorization"}
    async with httpx2.AsyncClient(auth=provider, transport=transport, headers=headers, timeout=30.0) as http:
        try:
            if isinstance(server, SseServerConfig):
                async with http.stream("GET", server.url, headers={"Accept": "text/event-stream"}) as response:
                    status = response.status_code
            else:
                response = await http.post(server.url, json=_initialize(), headers=_MCP_HEADERS)
                status = response.status_code
        except httpx2.HTTPError as exc:
            raise OAuthError(server.name, server.url, f"request failed: {exc!r}") from exc
    if status in (401, 403):
        raise OAuthError(server.name, server.url, f"the server still answers HTTP {status} after the login")


async def _from_challenge(
    provider: OAuthClientProvider,
    transport: httpx2.AsyncBaseTransport,
    request: httpx2.Request,
    answer: httpx2.Response,
) -> None:
    """Drive the provider's auth flow (httpx's public ``Auth`` protocol) from an answer already received.

    The flow's own requests (metadata, registration, token) are sent here; when it is ready to send the
    session's request again, it stops: the session retries that request itself, so nothing runs twice.
    """
    bare = httpx2.Request(request.method, request.url, headers=_without_authorization(request.headers))
    steps = provider.async_auth_flow(bare)
    try:
        outgoing = await steps.__anext__()
        outgoing = await steps.asend(answer)
        async with httpx2.AsyncClient(transport=transport, timeout=30.0) as http:
            for _ in range(MAX_FLOW_STEPS):
                if outgoing.method == request.method and outgoing.url == request.url:
                    return
                response = await http.send(outgoing)
                await response.aread()
                outgoing = await steps.asend(response)
    except StopAsyncIteration:
        return
    finally:
        await steps.aclose()
    raise OAuthFlowError(f"the OAuth flow took more than {MAX_FLOW_STEPS} requests")


def _without_authorization(headers: httpx2.Headers) -> dict[str, str]:
    return {key: value for key, value in headers.items() if key.lower() not in ("authorization", "content-length")}


_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL_VERSION}


def _initialize() -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": "login"},
        },
    }


def _dpop_key(flow: _Flow) -> DPoPKey:
    """The key of the server's earlier DPoP login (its refresh token is bound to it), else a new one."""
    record = flow.vault.load(flow.server.name)
    if record is not None and record.dpop_key is not None:
        try:
            return DPoPKey.from_pem(record.dpop_key)
        except ValueError:
            logger.warning("oauth: server %r: the stored DPoP key is unusable; a new one is made", flow.server.name)
    return DPoPKey.generate()


def _finish(flow: _Flow, provider: OAuthClientProvider, storage: _Storage, grant: str) -> AuthRecord:
    context = provider.context
    tokens = storage.tokens
    if tokens is None:
        raise OAuthError(
            flow.server.name,
            flow.server.url,
            "the server did not ask for a login (it answered without a 401)",
            hint="nothing to do: the server needs no OAuth login",
        )
    metadata = context.oauth_metadata
    token_endpoint = str(metadata.token_endpoint) if metadata is not None else urljoin(flow.server.url, "/token")
    client = context.client_info or storage.client
    body = tokens.model_dump(exclude_none=True)
    bound = flow.dpop is not None and flow.dpop.bound
    if bound:
        body["token_type"] = "DPoP"
    return flow.record(
        dpop_key=flow.dpop.key.to_pem() if flow.dpop is not None and bound else None,
        grant=grant,
        resource=context.get_resource_url(),
        issuer=str(metadata.issuer) if metadata is not None else None,
        token_endpoint=token_endpoint,
        client=None if client is None else client.model_dump(mode="json", exclude_none=True),
        tokens=token_set_from(body, None, storage.tokens_at),
        wanted_scope=None,
    )
