"""The private names of the MCP SDK (``mcp``, tested with 2.3) that mcpmux needs, and only here.

Why each is needed and what would replace it:

- ``MCPServer._lowlevel_server``: the low-level :class:`~mcp.server.Server` behind an
  ``MCPServer``, to serve it over a stream pair of ours (in-process, TCP, WebSocket). The SDK's own
  in-memory transport reads it the same way, with a TODO to make it public: a public
  ``MCPServer.lowlevel_server`` would replace it.
- ``mcp.server._otel.OpenTelemetryMiddleware``: the SDK puts it in every server's
  ``middleware`` and documents "drop it from this list to opt out", but exports the class only
  from a private module. A public export (or a ``tracing=False`` switch) would replace it.
- ``mcp.client._input_required.run_input_required_driver``: the SEP-2322 retry loop that
  ``mcp.Client`` runs for ``input_required`` results; mcpmux drives a ``ClientSession`` and needs
  the same loop. A public export (or ``ClientSession`` driving it itself) would replace it.
- :class:`SessionTransport`: the 2025-era Streamable HTTP server transport has no hook to answer
  a POST itself (the gateway answers short calls with one JSON body, :mod:`mcpmux.gateway.responses`).
  It overrides ``_handle_post_request`` and reads five members, and gives them public names here.
  A per-request response-mode hook in the SDK would replace it.
- :class:`GrantProvider`: the SDK's OAuth client implements the code flow and client credentials
  only; RFC 7523's jwt-bearer grant (workload identity federation) needs the same discovery (RFC
  9728, RFC 8414, issuer checks, resource indicator) with another token request. It overrides
  ``OAuthClientProvider._initialize`` (a fixed client, no registration) and ``_perform_authorization``
  (the token request) exactly as the SDK's own ``ClientCredentialsOAuthProvider`` does, and reads
  ``_get_token_endpoint``. A grant hook (or a jwt-bearer provider) in the SDK would replace it.
- ``ServerSession._connection``: a request context's session exposes the client's parameters but
  not the :class:`~mcp.server.connection.Connection` that holds them; the gateway's direct calls
  (:mod:`mcpmux.gateway.direct`) build each call's session over the session's own connection, so
  they see what the SDK sees (a client that initializes again included). :func:`connection_of`
  reads it; a public ``ServerSession.connection`` would replace it.
- :class:`SessionManager`: the session manager has no factory for a new session's transport (the
  gateway wants its own transport class and longer session ids). It overrides ``_admit_session``
  and keeps the SDK's two session tables. A ``transport_factory=`` argument would replace it. Its
  :meth:`~SessionManager.serve_open_session` routes a POST of an open session as the SDK's stateful
  path does (reading the two tables, calling ``_discard_session``) without the manager's outer
  layers, which the gateway's own middleware already did: ~0.06 M instructions per proxied call.

:data:`PRIVATE_NAMES` lists every one of them for ``tests/test_private_apis.py``. Importing this
module imports the whole SDK (as any ``mcp`` import does): keep it off light import paths.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._input_required import run_input_required_driver
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.server.session import ServerSession
from mcp.server.streamable_http import REQUEST_STREAM_BUFFER_SIZE, EventMessage, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from mcp_types import JSONRPCRequest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

__all__ = [
    "CALLED_BY",
    "DISTRIBUTION",
    "PRIVATE_NAMES",
    "GrantProvider",
    "OpenTelemetryMiddleware",
    "SessionManager",
    "SessionTransport",
    "connection_of",
    "lowlevel_server",
    "run_input_required_driver",
]

DISTRIBUTION: Final = "mcp"

_TRANSPORT = "mcp.server.streamable_http.StreamableHTTPServerTransport"
_MANAGER = "mcp.server.streamable_http_manager.StreamableHTTPSessionManager"
_OAUTH = "mcp.client.auth.oauth2.OAuthClientProvider"
PRIVATE_NAMES: Final[dict[str, str | None]] = {
    # A name and the parameters we pass (``None``: a class, or an attribute we read). ``Class#attr``
    # is an attribute of an instance made with default arguments.
    "mcp.server.mcpserver.MCPServer#_lowlevel_server": None,
    "mcp.server._otel.OpenTelemetryMiddleware": None,
    "mcp.client._input_required.run_input_required_driver": "first, *, dispatch, retry, max_rounds",
    "mcp.server.session.ServerSession#_connection": None,
    f"{_TRANSPORT}._handle_post_request": "self, scope, request, receive, send",
    f"{_TRANSPORT}._check_content_type": "self, request",
    f"{_TRANSPORT}._validate_request_headers": "self, request, send",
    f"{_TRANSPORT}._create_session_message": "self, message, request, request_id, protocol_version",
    f"{_TRANSPORT}._clean_up_memory_streams": "self, request_id",
    # Public, but overridden (DeferredTransport stops its direct calls as the session ends).
    f"{_TRANSPORT}.terminate": "self",
    f"{_TRANSPORT}#_event_store": None,
    f"{_TRANSPORT}#_request_streams": None,
    f"{_TRANSPORT}#_read_stream_writer": None,
    f"{_MANAGER}._admit_session": "self, requestor",
    f"{_MANAGER}#_server_instances": None,
    f"{_MANAGER}#_session_owners": None,
    f"{_MANAGER}._discard_session": "self, session_id, transport",
    f"{_OAUTH}._initialize": "self",
    f"{_OAUTH}._perform_authorization": "self",
    f"{_OAUTH}._get_token_endpoint": "self",
}
CALLED_BY: Final[dict[str, str]] = {
    # An override, and the SDK function that must still call it (or the override does nothing).
    f"{_TRANSPORT}._handle_post_request": f"{_TRANSPORT}._handle_request",
    f"{_TRANSPORT}.terminate": f"{_TRANSPORT}._handle_delete_request",
    f"{_MANAGER}._admit_session": f"{_MANAGER}._handle_stateful_request",
    f"{_OAUTH}._initialize": f"{_OAUTH}._auth_flow",
    f"{_OAUTH}._perform_authorization": f"{_OAUTH}._auth_flow",
}


class GrantProvider(OAuthClientProvider):
    """The SDK's OAuth client with a token request of ours as its authorization step.

    Discovery, the issuer checks and the resource indicator stay the SDK's; the client is ``client``
    (no registration), and ``grant_form`` gives the grant's form fields (``grant_type`` and what it
    needs), called once per token request so an assertion is read fresh each time.
    """

    def __init__(
        self,
        server_url: str,
        storage: TokenStorage,
        client: OAuthClientInformationFull,
        grant_form: Callable[[], Awaitable[dict[str, str]]],
        scope: str | None = None,
    ) -> None:
        metadata = OAuthClientMetadata(
            redirect_uris=None,
            grant_types=list(client.grant_types),
            token_endpoint_auth_method=client.token_endpoint_auth_method,
            scope=scope,
        )
        super().__init__(server_url, metadata, storage, None, None)
        self.fixed_client, self.grant_form = client, grant_form

    async def _initialize(self) -> None:
        self.context.current_tokens = await self.context.storage.get_tokens()
        self.context.client_info = self.fixed_client
        self._initialized = True

    async def _perform_authorization(self) -> httpx2.Request:
        form = await self.grant_form()
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        form, headers = self.context.prepare_token_auth(form, headers)
        if "Authorization" not in headers:
            form.setdefault("client_id", self.fixed_client.client_id)
        if self.context.should_include_resource_param(self.context.protocol_version):
            form["resource"] = self.context.get_resource_url()
        if self.context.client_metadata.scope:
            form["scope"] = self.context.client_metadata.scope
        return httpx2.Request("POST", self._get_token_endpoint(), data=form, headers=headers)


def connection_of(session: ServerSession) -> Connection:
    """The connection a request's session speaks over (client parameters, protocol version, outbound)."""
    connection: Connection = session._connection
    return connection


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The low-level :class:`Server` behind ``server``, to run it over a given stream pair."""
    inner: Server[Any] = server._lowlevel_server
    return inner


class SessionTransport(StreamableHTTPServerTransport):
    """The SDK's 2025-era server transport, with a public hook for each request POST.

    Override :meth:`handle_post` to answer some POSTs yourself; the other methods are the parts
    of the SDK transport such an answer needs.
    """

    async def _handle_post_request(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        await self.handle_post(scope, request, receive, send)

    async def handle_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        """Serve one POST (by default exactly as the SDK does)."""
        await super()._handle_post_request(scope, request, receive, send)

    @property
    def has_event_store(self) -> bool:
        """Whether streams are resumable (an event store records them)."""
        return self._event_store is not None

    def content_type_ok(self, request: Request) -> bool:
        """Whether the POST says its body is JSON."""
        return self._check_content_type(request)

    async def headers_ok(self, request: Request, send: Send) -> bool:
        """Check the session and protocol-version headers; on failure the error answer is sent."""
        return await self._validate_request_headers(request, send)

    def open_request_stream(
        self, request_id: str
    ) -> tuple[MemoryObjectSendStream[EventMessage], MemoryObjectReceiveStream[EventMessage]]:
        """Register the stream on which the session's messages for ``request_id`` arrive; both its ends."""
        streams = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = streams
        return streams

    async def close_request_stream(self, request_id: str) -> None:
        """Close and forget the stream of ``request_id``."""
        await self._clean_up_memory_streams(request_id)

    async def dispatch(self, message: JSONRPCRequest, request: Request, request_id: str, version: str) -> None:
        """Hand ``message`` to the session, framed as the SDK frames a POSTed request."""
        writer = self._read_stream_writer
        assert writer is not None, "connect() runs before any request is served"
        await writer.send(self._create_session_message(message, request, request_id, version))


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, taking the factory of each new session's transport.

    Args:
        app: the server every session runs.
        new_transport: makes the transport of a new session (its ``mcp_session_id`` set) from this
            manager's settings (``json_response``, ``event_store``, ``security_settings``, ...).
        kwargs: the SDK manager's other arguments.
    """

    def __init__(
        self,
        app: Server[Any],
        *,
        new_transport: Callable[[StreamableHTTPSessionManager], StreamableHTTPServerTransport],
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.new_transport = new_transport

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        # The SDK's admission (session limit, owner, registration) around our transport.
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        transport = self.new_transport(self)
        session_id = transport.mcp_session_id
        assert session_id is not None, "a stateful session's transport has an id"
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    async def serve_open_session(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve a POST on an open 2025-era session as the SDK routes it, without its outer layers.

        Only what the SDK's stateful path would hand to the session's transport unchanged: a POST
        naming a handshake revision and a session that exists, by the credential that opened it.
        That path's two outer layers are skipped: the era routing (done here) and the body limit
        (``RequestBodyLimitMiddleware``): the caller must have capped the body at
        ``max_request_body_size`` already (the gateway's SecurityMiddleware does, with the same
        limit). Returns whether it served the request; ``False`` leaves it untouched.
        """
        if scope["method"] != "POST" or self.stateless:
            return False
        version = session_id = None
        for name, value in scope["headers"]:
            if name == b"mcp-protocol-version" and version is None:
                version = value.decode("latin-1")
            elif name == b"mcp-session-id" and session_id is None:
                session_id = value.decode("latin-1")
        transport = self._server_instances.get(session_id) if session_id is not None else None
        if transport is None or session_id is None or version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return False
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor != self._session_owners.get(session_id):
            return False  # the SDK's path refuses it (404), exactly as for an unknown session
        await transport.handle_request(scope, receive, send)
        if transport.is_terminated:
            await self._discard_session(session_id, transport)
        return True
