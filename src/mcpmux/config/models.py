"""Typed, frozen configuration models: what every layer receives after loading.

A server entry is a discriminated union on ``type``. String values that came from ``${VAR}``
interpolation are already expanded here; env and header values are :class:`SecretStr`, so a
``repr`` or a log line never shows them.
"""

from __future__ import annotations

import enum
import fnmatch
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PrivateAttr,
    RootModel,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema

from mcpmux.canonical_names import SERVER_NAME_PATTERN
from mcpmux.errors import ConfigError, ConfigProblem, UnresolvedVariable

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "TOOLSET_NAME_PATTERN",
    "AgentConfig",
    "AgentsSection",
    "ApprovalRule",
    "BuiltinServerConfig",
    "CacheConfig",
    "Config",
    "DeclaredResource",
    "DiscoveryConfig",
    "GatewayApprovers",
    "IdentityProviderConfig",
    "LLMConfig",
    "NetworkServerConfig",
    "OAuthConfig",
    "OpenAPIAuth",
    "OpenAPIServerConfig",
    "ProtocolChoice",
    "SandboxConfig",
    "SecurityConfig",
    "ServerConfig",
    "ServerSecurity",
    "Settings",
    "SseServerConfig",
    "StdioServerConfig",
    "StreamableHttpServerConfig",
    "TcpServerConfig",
    "ToolsetConfig",
    "ToolsetsSection",
    "TransportType",
    "WebSocketServerConfig",
    "declared_for",
]

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_CONNECT_TIMEOUT_MS = 30_000
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class TransportType(enum.StrEnum):
    """The ``type`` of a server entry, for code that prefers names to strings.

    A member is its string (``TransportType.HTTP == "http"``), so the config, every model and
    ``ServerConfig(type=...)`` take either; ``TransportType(entry.type)`` names an entry's.
    """

    STDIO = "stdio"
    SSE = "sse"
    HTTP = "http"
    WEBSOCKET = "websocket"
    TCP = "tcp"
    BUILTIN = "builtin"
    OPENAPI = "openapi"


ProtocolChoice = Literal["auto", "2025-11-25", "2026-07-28"]
PinningMode = Literal["off", "tofu", "strict"]
BuiltinKind = Literal["workspace", "content_store"]
DaemonMode = Literal["auto", "on", "off"]
ShareMode = Literal["machine", "per-client", "per-call"]
DEFAULT_IDLE_TIMEOUT_S = 600.0


def _one_item_list(value: object) -> object:
    """A single string where a list is expected is a list of that one string."""
    return (value,) if isinstance(value, str) else value


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class SandboxConfig(_Frozen):
    """Isolation of a stdio child server (enforced by the guard layer)."""

    enabled: bool = False
    network: bool = False
    filesystem: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    required: bool = True

    _one_item = field_validator("filesystem", "writable", mode="before")(_one_item_list)


class ApprovalRule(_Frozen):
    """One approval rule: tools matching ``tools`` (a glob over canonical names), and whose
    arguments match every glob in ``arguments`` (compared with the value as text), get ``action``.

    Example: ``{tools: "fs:write_*", arguments: {path: "/tmp/*"}, action: allow}``.

    ``callers`` (globs) limits the rule to some callers: ``group:NAME`` for a member of group NAME
    (groups come from a gateway caller's verified OAuth token), any other pattern the caller's
    identity (``token:oauth:alice``, ``agent:*``); empty: every caller
    (see :mod:`mcpmux.policy.callers`).
    """

    tools: str
    arguments: dict[str, str] = Field(default_factory=dict)
    action: Literal["allow", "ask", "deny"]
    callers: tuple[str, ...] = ()


class ServerSecurity(_Frozen):
    """Per-server policy; the same keys as the global block, all optional."""

    require_approval: bool | tuple[str, ...] | None = None
    allowed_tools: tuple[str, ...] | None = None
    denied_tools: tuple[str, ...] | None = None
    approval_rules: tuple[ApprovalRule, ...] = ()
    sandbox: SandboxConfig | None = None

    _one_item = field_validator("allowed_tools", "denied_tools", mode="before")(_one_item_list)


class GatewayApprovers(_Frozen):
    """Which gateway callers may answer the guard's approval questions (``mcp.security.gateway_approvers``).

    Any other caller whose call needs approval is refused, not asked. A network client without a
    token never may: it may be a page in a browser answering its own question.
    """

    stdio: bool = True  # the client that started ``mcpmux serve --stdio`` (a local process)
    tokens: bool = True  # HTTP callers whose token was made with ``mcpmux token create --can-approve``
    # With the web console served (/ui): a call its own client cannot answer waits for a person there.
    console: bool = True
    console_timeout_s: float = Field(120.0, gt=0, le=86400)  # no answer by then: denied


class SecurityConfig(_Frozen):
    """Global policy (``mcp.security``)."""

    require_approval: bool | tuple[str, ...] = False
    allowed_tools: tuple[str, ...] | None = None
    denied_tools: tuple[str, ...] = ()
    approval_rules: tuple[ApprovalRule, ...] = ()
    pinning: PinningMode = "tofu"
    sandbox: SandboxConfig = SandboxConfig()
    gateway_approvers: GatewayApprovers = GatewayApprovers()

    _one_item = field_validator("allowed_tools", "denied_tools", mode="before")(_one_item_list)

    def for_bare_names(self, name: str, namespace: str) -> SecurityConfig:
        """These rules for server ``name`` served alone under bare names (``mcpmux connect NAME``).

        A bare tool is matched as ``NAME:TOOL``; a rule written with the server's own prefix
        (``NAMESPACE:...``, when that differs from its name) gets the same rule under ``NAME:...``
        beside it, so it holds there too.
        """
        if not namespace or namespace == name:
            return self

        def aliased(patterns: tuple[str, ...]) -> tuple[str, ...]:
            mark = f"{namespace}:"
            return patterns + tuple(f"{name}:{p[len(mark) :]}" for p in patterns if p.startswith(mark))

        rules = tuple(
            r for rule in self.approval_rules
            for r in (rule, *([rule.model_copy(update={"tools": aliased((rule.tools,))[1]})]
                              if rule.tools.startswith(f"{namespace}:") else []))
        )  # fmt: skip
        update: dict[str, object] = {"denied_tools": aliased(self.denied_tools), "approval_rules": rules}
        if self.allowed_tools is not None:
            update["allowed_tools"] = aliased(self.allowed_tools)
        if isinstance(self.require_approval, tuple):
            update["require_approval"] = aliased(self.require_approval)
        return self.model_copy(update=update)


class Settings(_Frozen):
    """Defaults that every server inherits unless its entry overrides them (``mcp.settings``)."""

    timeout_ms: int = Field(DEFAULT_TIMEOUT_MS, gt=0)
    connect_timeout_ms: int = Field(DEFAULT_CONNECT_TIMEOUT_MS, gt=0)
    retry_attempts: int = Field(3, ge=0)
    auto_reconnect: bool = True
    max_message_bytes: int = Field(DEFAULT_MAX_MESSAGE_BYTES, ge=1024)
    lazy: bool = False
    max_concurrent_calls: int = Field(32, ge=1)
    max_transient_servers: int = Field(8, ge=1)
    """How many ``lifecycle: transient`` servers may run at once; a call to another waits for a slot."""
    max_queued_calls: int = Field(256, ge=0)
    health_interval_ms: int | None = Field(None, gt=0)
    env_passthrough: tuple[str, ...] = ()
    """Names and globs (``CORP_*``) of mcpmux's environment variables that stdio children also get,
    besides the built-in allow-list (PATH, HOME, locale, trust stores, proxies, ...)."""

    # ``mcpmux daemon`` (docs/daemon.md): ``auto`` uses it when it runs, else starts servers here;
    # ``on`` requires it (starting it on demand); ``off`` never uses it.
    daemon: DaemonMode = "auto"
    idle_timeout_s: float = Field(DEFAULT_IDLE_TIMEOUT_S, gt=0)
    """How long the daemon keeps a stdio server with no client attached before stopping it."""

    _one_item = field_validator("env_passthrough", mode="before")(_one_item_list)


class CacheConfig(_Frozen):
    """Result caching of a server's idempotent tools (``cache: {ttl_s: 60, tools: ["get_*"]}``).

    Only tools annotated ``readOnlyHint`` and ``idempotentHint`` are cached unless ``force`` is
    set; a result's own ``ttlMs`` (2026-07-28) shortens the time, and ``0`` keeps it out.
    """

    ttl_s: float = Field(60.0, gt=0)
    tools: tuple[str, ...] = ("*",)
    force: bool = False

    _one_item = field_validator("tools", mode="before")(_one_item_list)


class DeclaredResource(_Frozen):
    """A resource a server exposes (``resources: [{uri: "docs://api/*", description: ...}]``).

    ``uri`` is a glob (``*``, ``?``, ``[...]``) over resource URIs; a template is matched by its
    pattern (``docs://api/{name}`` matches ``docs://api/*``). ``description`` is told to the model.
    """

    uri: str = Field(min_length=1)
    description: str | None = None

    def matches(self, uri: str) -> bool:
        """Whether ``uri`` (a resource's URI or a template's pattern) falls under this declaration."""
        return fnmatch.fnmatchcase(uri, self.uri)


def declared_for(declared: tuple[DeclaredResource, ...] | None, uri: str) -> DeclaredResource | None:
    """The first declaration covering ``uri``; ``None`` if none does (everything is exposed when
    ``declared`` is ``None``: check that first)."""
    return next((d for d in declared or () if d.matches(uri)), None)


class _ServerBase(_Frozen):
    name: str
    enabled: bool = True
    prefix: str | None = None
    description: str | None = None
    timeout_ms: int | None = Field(None, gt=0)
    connect_timeout_ms: int | None = Field(None, gt=0)
    auto_reconnect: bool | None = None
    retry_attempts: int | None = Field(None, ge=0)
    protocol: ProtocolChoice = "auto"
    lazy: bool | None = None
    # ``transient``: started for a call (or a sync) and stopped as soon as no call is left; at most
    # ``settings.max_transient_servers`` such servers run at once. ``singleton``: kept running.
    lifecycle: Literal["singleton", "transient"] = "singleton"
    # Check call arguments against each tool's inputSchema before sending (``validate: false`` for
    # servers whose schemas lie). Named ``validate`` in files; the attribute avoids BaseModel.validate.
    validate_arguments: bool = Field(True, alias="validate")
    # The resources exposed, with what the model is told of them; absent: every resource the server lists.
    resources: tuple[DeclaredResource, ...] | None = None
    cache: CacheConfig | None = None
    # The values that came from ``${VAR}`` interpolation into this entry (set by the loader, never read
    # from a file): whatever prints or stores this server's output masks them (stderr log, errors).
    secret_values: frozenset[str] = Field(default=frozenset(), exclude=True, repr=False)
    security: ServerSecurity | None = None

    # (variable, problem) for each ``${VAR}`` left unexpanded; set by the loader, never by a file.
    _unresolved: tuple[tuple[str, ConfigProblem], ...] = PrivateAttr(default=())

    @property
    def unresolved(self) -> tuple[ConfigProblem, ...]:
        """Where this server uses unset variables (empty when every reference was expanded).

        Such a server is loaded with its references as written, but cannot start.
        """
        return tuple(problem for _, problem in self._unresolved)

    def unresolved_error(self) -> UnresolvedVariable | None:
        """The error that starting this server raises, or ``None`` when nothing is unresolved."""
        if not self._unresolved:
            return None
        return UnresolvedVariable(self.name, list(self.unresolved), [var for var, _ in self._unresolved])

    def with_unresolved(self, unresolved: list[tuple[str, ConfigProblem]]) -> Self:
        """A copy of this server that records ``(variable, problem)`` pairs of unset references."""
        copy = self.model_copy()
        copy._unresolved = tuple(unresolved)
        return copy

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not re.fullmatch(SERVER_NAME_PATTERN, value):
            raise ValueError(
                f"server name {value!r} must match {SERVER_NAME_PATTERN} "
                "(lower-case letters, digits, '_' and '-', at most 32 characters)"
            )
        return value

    @field_validator("prefix")
    @classmethod
    def _valid_prefix(cls, value: str | None) -> str | None:
        if value and not re.fullmatch(SERVER_NAME_PATTERN, value):
            raise ValueError(f"prefix {value!r} must be empty or match {SERVER_NAME_PATTERN}")
        return value

    def effective_timeout_s(self, settings: Settings) -> float:
        """The request timeout of this server in seconds."""
        return (self.timeout_ms or settings.timeout_ms) / 1000

    def effective_connect_timeout_s(self, settings: Settings) -> float:
        """The connect-and-handshake timeout of this server in seconds."""
        return (self.connect_timeout_ms or settings.connect_timeout_ms) / 1000

    def starts_lazily(self, settings: Settings) -> bool:
        """Whether the server waits for its first call (``lazy``, or a ``transient`` lifecycle)."""
        if self.lifecycle == "transient":
            return True
        return self.lazy if self.lazy is not None else settings.lazy

    @property
    def namespace(self) -> str:
        """The prefix of this server's canonical names (``prefix`` if set, else ``name``)."""
        return self.name if self.prefix is None else self.prefix


class StdioServerConfig(_ServerBase):
    """A server run as a child process speaking newline-delimited JSON-RPC on stdio."""

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, SecretStr] = Field(default_factory=dict)
    cwd: Path | None = None
    # Restart the child when it and its descendants hold more resident memory than this (checked
    # every few seconds; the reason goes into the state history).
    max_rss_mb: float | None = Field(None, gt=0)
    # Through ``mcpmux daemon``: one instance for every client (``machine``), one per connected
    # client (``per-client``), or none kept (``per-call``: each command starts its own).
    share: ShareMode = "machine"
    idle_timeout_s: float | None = Field(None, gt=0)


class NetworkServerConfig(_ServerBase):
    """Fields shared by every server reached over the network."""

    url: str = Field(min_length=1)
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    verify_tls: bool = True

    schemes: ClassVar[tuple[str, ...]] = ("http", "https")

    @field_validator("url")
    @classmethod
    def _scheme_matches_type(cls, url: str) -> str:
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme not in cls.schemes:
            wanted = " or ".join(f"{s}://" for s in cls.schemes)
            kind = cls.model_fields["type"].default if "type" in cls.model_fields else "?"
            raise ValueError(f"must start with {wanted} for type {kind!r}")
        return url


class IdentityProviderConfig(_Frozen):
    """SEP-990 (enterprise-managed authorization): the enterprise IdP that turns the person's ID token
    into an Identity Assertion JWT Authorization Grant (ID-JAG) by token exchange (RFC 8693).

    With it, ``grant: jwt_bearer``'s ``assertion_file`` or ``assertion_env`` holds the IdP's ID token
    (from the enterprise sign-in); for every token request mcpmux exchanges it at ``token_endpoint``
    for an ID-JAG naming the MCP server's authorization server and resource, and presents that.
    """

    token_endpoint: str
    client_id: str
    client_secret: SecretStr | None = None


class OAuthConfig(_Frozen):
    """How mcpmux obtains OAuth 2.1 tokens for one HTTP server (its ``auth:`` block; see ``mcpmux.auth``).

    With no ``client_id`` and no ``client_metadata_url`` the client registers itself dynamically
    (RFC 7591) once, and keeps the registration. ``grant: client_credentials`` needs ``client_id``
    and ``client_secret``, or ``private_key`` (PEM, for ``private_key_jwt`` assertions signed with
    ``signing_algorithm``), and never opens a browser. ``grant: jwt_bearer`` (RFC 7523, workload identity
    federation) presents a workload's JWT, read fresh for every token request from ``assertion_file``
    (e.g. a Kubernetes projected token) or the environment variable ``assertion_env``, as the grant.
    ``dpop`` binds the tokens to a key of mcpmux's (RFC 9449): unset, whenever the authorization
    server offers DPoP (ES256); ``true`` always, ``false`` never. ``identity_provider`` (with
    ``jwt_bearer``) makes the assertion an ID-JAG of the enterprise IdP (SEP-990,
    :class:`IdentityProviderConfig`).
    """

    grant: Literal["authorization_code", "client_credentials", "jwt_bearer"] = "authorization_code"
    client_id: str | None = None
    client_secret: SecretStr | None = None
    private_key: SecretStr | None = None
    signing_algorithm: str = "RS256"
    client_metadata_url: str | None = None
    scopes: tuple[str, ...] = ()
    issuer: str | None = None
    allow_private_addresses: bool = False
    redirect_port: int = Field(0, ge=0, le=65535)
    assertion_file: str | None = None
    assertion_env: str | None = None
    dpop: bool | None = None
    identity_provider: IdentityProviderConfig | None = None

    _one_scope = field_validator("scopes", mode="before")(_one_item_list)

    @model_validator(mode="after")
    def _credentials_for_grant(self) -> Self:
        if self.grant == "client_credentials" and (
            self.client_id is None or (self.client_secret is None and self.private_key is None)
        ):
            raise ValueError("grant 'client_credentials' needs client_id and client_secret (or private_key)")
        if self.grant == "jwt_bearer" and (self.assertion_file is None) == (self.assertion_env is None):
            raise ValueError("grant 'jwt_bearer' needs one of assertion_file or assertion_env (the workload's JWT)")
        if self.identity_provider is not None and self.grant != "jwt_bearer":
            raise ValueError("identity_provider (SEP-990) goes with grant 'jwt_bearer' (its ID token as the assertion)")
        return self


class SseServerConfig(NetworkServerConfig):
    """A server reached over the legacy HTTP+SSE transport."""

    type: Literal["sse"] = "sse"
    auth: OAuthConfig | None = None


class StreamableHttpServerConfig(NetworkServerConfig):
    """A server reached over Streamable HTTP."""

    type: Literal["http"] = "http"
    auth: OAuthConfig | None = None


class WebSocketServerConfig(NetworkServerConfig):
    """A server reached over WebSocket (subprotocol ``mcp``)."""

    type: Literal["websocket"] = "websocket"
    schemes = ("ws", "wss")


class TcpServerConfig(NetworkServerConfig):
    """A server reached over plain TCP, one JSON-RPC message per line (``tcp://HOST:PORT``)."""

    type: Literal["tcp"] = "tcp"
    schemes = ("tcp",)

    @field_validator("headers")
    @classmethod
    def _no_headers(cls, headers: dict[str, SecretStr]) -> dict[str, SecretStr]:
        # A line-delimited TCP stream has nowhere to carry them: a bearer token here was silently never sent.
        if headers:
            raise ValueError(
                "a tcp server gets no headers (plain TCP has nowhere to carry them, so a token here would never "
                "be sent); reach it over http(s):// or ws(s):// to authenticate, or remove headers"
            )
        return headers


class BuiltinServerConfig(_ServerBase):
    """One of mcpmux's own servers, run in-process."""

    type: Literal["builtin"] = "builtin"
    builtin: BuiltinKind | None = None
    root: Path | None = None
    database: Path | None = None
    allow_wide_root: bool = False
    """Serve a root such as ``/`` or the home directory itself, refused by default (keys live there)."""

    @model_validator(mode="after")
    def _known_builtin(self) -> BuiltinServerConfig:
        if self.kind not in ("workspace", "content_store"):
            raise ValueError(
                f"no built-in server {self.name!r}: use builtin: workspace|content_store or name the server after one"
            )
        return self

    @property
    def kind(self) -> str:
        """Which built-in server this entry runs (``builtin``, else the name)."""
        return self.builtin or self.name.replace("-", "_")


class OpenAPIAuth(_Frozen):
    """How an OpenAPI source authenticates its requests (``auth:`` of a ``type: openapi`` server).

    ``bearer`` sends ``Authorization: Bearer TOKEN``; ``basic`` sends ``username``/``password``;
    ``api_key`` sends ``value`` as the header, query parameter or cookie ``name`` (both default to
    the document's ``apiKey`` security scheme when it declares exactly one). Values are secrets: write
    them as ``${VAR}``.
    """

    type: Literal["bearer", "basic", "api_key"]
    token: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None
    name: str | None = None
    location: Literal["header", "query", "cookie"] | None = Field(None, alias="in")
    value: SecretStr | None = None

    @model_validator(mode="after")
    def _complete(self) -> OpenAPIAuth:
        needed = {"bearer": ("token",), "basic": ("username", "password"), "api_key": ("value",)}[self.type]
        missing = [field for field in needed if getattr(self, field) is None]
        if missing:
            raise ValueError(f"auth type {self.type!r} needs {' and '.join(missing)}")
        return self


class OpenAPIServerConfig(_ServerBase):
    """A REST service described by an OpenAPI 3.0/3.1 or Swagger 2.0 document, served as MCP tools.

    Each operation becomes a tool; calls are HTTP requests to ``base_url`` (default: the document's
    server). A server URL taken from the document that points at a private, loopback or link-local
    address is refused unless ``allow_private_network`` (an explicit ``base_url`` is trusted).
    """

    type: Literal["openapi"] = "openapi"
    spec: str = Field(min_length=1)
    """A path to the document (JSON or YAML) or its ``http(s)://`` URL."""
    base_url: str | None = None
    auth: OpenAPIAuth | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    include_tags: tuple[str, ...] = ()
    exclude_tags: tuple[str, ...] = ()
    include_operations: tuple[str, ...] = ()
    """Globs over operationIds (or generated tool names); empty means every operation."""
    exclude_operations: tuple[str, ...] = ()
    verify_tls: bool = True
    allow_private_network: bool = False
    max_response_bytes: int = Field(8 * 1024 * 1024, ge=1024)

    _one_item = field_validator(
        "include_tags", "exclude_tags", "include_operations", "exclude_operations", mode="before"
    )(_one_item_list)

    @field_validator("base_url")
    @classmethod
    def _http_base(cls, value: str | None) -> str | None:
        if value is None or "${" in value:
            return value
        if not re.match(r"(?i)https?://[^/?#\s]+", value):
            raise ValueError("must be an http:// or https:// URL")
        return value


_SERVER_TYPES = (
    StdioServerConfig,
    SseServerConfig,
    StreamableHttpServerConfig,
    WebSocketServerConfig,
    TcpServerConfig,
    BuiltinServerConfig,
    OpenAPIServerConfig,
)
_AnyServerConfig = Annotated[
    StdioServerConfig
    | SseServerConfig
    | StreamableHttpServerConfig
    | WebSocketServerConfig
    | TcpServerConfig
    | BuiltinServerConfig
    | OpenAPIServerConfig,
    Field(discriminator="type"),
]

if TYPE_CHECKING:
    ServerConfig = _AnyServerConfig
else:

    class _ServerConfigType(type):
        """Makes the union constructible and usable with ``isinstance`` (type checkers see the union)."""

        def __instancecheck__(cls, instance: object) -> bool:
            return isinstance(instance, _SERVER_TYPES)

        def __call__(cls, **fields: object) -> _AnyServerConfig:
            fields.setdefault("type", "stdio")
            try:
                return _server_adapter().validate_python(fields)
            except ValidationError as exc:
                raise ConfigError(_problems("ServerConfig(...)", exc, fields["type"])) from exc

    class ServerConfig(metaclass=_ServerConfigType):
        """Any server entry, the union of the ``*ServerConfig`` models discriminated by ``type``.

        Constructible: ``ServerConfig(name="time", command="uvx", args=["mcp-server-time"])`` is a
        :class:`StdioServerConfig` (``type`` defaults to ``stdio``); ``ServerConfig(name="gh",
        type="http", url="https://...")`` a :class:`StreamableHttpServerConfig`. Invalid fields raise
        :class:`~mcpmux.errors.ConfigError` listing every problem.
        """

        @classmethod
        def __get_pydantic_core_schema__(cls, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
            return handler(_AnyServerConfig)


@functools.cache
def _server_adapter() -> TypeAdapter[_AnyServerConfig]:
    return TypeAdapter(_AnyServerConfig)


def _problems(source: str, exc: ValidationError, kind: object) -> list[ConfigProblem]:
    out = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = error["loc"][1:] if error["loc"][:1] == (kind,) else error["loc"]
        path = ".".join(str(part) for part in loc)
        out.append(ConfigProblem(source, path, error["msg"].removeprefix("Value error, ")))
    return out


class LLMConfig(_Frozen):
    """Model settings for the agent face (a top-level ``llm:`` section)."""

    provider: Literal["openai", "anthropic"] = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, gt=0)


# -- toolsets and discovery (``toolsets:`` and ``discovery:`` beside ``mcp:``) -----------------------

TOOLSET_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,31}"
DEFAULT_DISCOVERY_LIMIT = 8
DEFAULT_LIST_TTL_MS = 60_000
_DISCOVERY_MODE = re.compile(r"all|search|auto:(?P<n>[0-9]{1,6})")


def _discovery_shorthand(value: object) -> object:
    """``discovery: search`` is ``discovery: {mode: search}``."""
    return {"mode": value} if isinstance(value, str) else value


class StorageConfig(_Frozen):
    """Where mcpmux keeps its rows (``storage: {url: ...}``): one SQLAlchemy URL for every part.

    Absent: the state (pins, approvals, audit, tokens) and the source registry are SQLite files in
    the data dir. A URL (``postgresql+psycopg://mcpmux@db/mcpmux``, ``${VAR}`` expanded and
    masked; ``MCPMUX_DB`` and ``--db`` take precedence) puts them all in that database.
    """

    url: str | None = Field(None, min_length=1)


class DiscoveryConfig(_Frozen):
    """How the gateway lists tools: every tool (``all``), or ``search_tools`` and ``call_tool`` instead.

    ``search``: clients see ``search_tools`` (BM25 over names, descriptions and parameter names,
    answering with full definitions) and ``call_tool`` (calls any tool the caller may see), plus the
    tools matching ``always_load`` (globs over canonical names). ``auto:N``: ``search`` once a
    caller would see more than N tools, else ``all``. ``list_ttl_ms``: the ``ttlMs`` a list gets
    from upstreams that give no hint of their own (they announce changes with ``list_changed``).
    """

    mode: str = "all"
    always_load: tuple[str, ...] = ()
    limit: int = Field(DEFAULT_DISCOVERY_LIMIT, ge=1, le=100)
    list_ttl_ms: int = Field(DEFAULT_LIST_TTL_MS, ge=0)

    _shorthand = model_validator(mode="before")(_discovery_shorthand)
    _one_item = field_validator("always_load", mode="before")(_one_item_list)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if not _DISCOVERY_MODE.fullmatch(value):
            raise ValueError(f"{value!r} is not a discovery mode (expected all, search or auto:N)")
        return value

    def searching(self, visible: int) -> bool:
        """Whether a caller who may see ``visible`` tools gets the search tools instead of the list."""
        if self.mode == "search":
            return True
        match = _DISCOVERY_MODE.fullmatch(self.mode)
        threshold = match.group("n") if match is not None else None
        return threshold is not None and visible > int(threshold)


class ToolsetConfig(_Frozen):
    """One toolset: the tools, resources and prompts a client of ``/mcp/NAME`` (or a token bound to it) sees.

    Patterns are globs (case-sensitive) over canonical names (``filesystem:read_*``); resources
    are matched as ``SERVER:URI`` (``docs:file:///srv/*``). A list left out exposes nothing of
    its kind. ``discovery`` overrides the global ``discovery:`` for this toolset.
    """

    description: str | None = None
    tools: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    discovery: DiscoveryConfig | None = None

    _one_item = field_validator("tools", "resources", "prompts", mode="before")(_one_item_list)


class ToolsetsSection(RootModel[dict[Annotated[str, Field(pattern=f"^{TOOLSET_NAME_PATTERN}$")], ToolsetConfig]]):
    """The ``toolsets:`` mapping as one section (merged by toolset name across files)."""

    model_config = ConfigDict(frozen=True)


# -- agents (issue 22): a model, instructions and the tools each may use ------------------------


class AgentConfig(_Frozen):
    """One agent (a top-level ``agents: {NAME: {...}}`` entry).

    ``tools`` (canonical-name globs, ``fs:read_*``) or ``toolset`` (a name in the top-level
    ``toolsets:``) is its allow-list; the guard refuses any other call of the agent's loop like a
    denied tool. ``model`` overrides ``llm.model``; ``mcpmux serve --agent NAME`` serves it as the
    tool ``ask_NAME``, which samples the calling client's model when neither names one.
    """

    name: str = ""  # the key of its entry (set by Config)
    model: str | None = None
    instructions: str = ""
    description: str | None = None
    toolset: str | None = None
    tools: tuple[str, ...] | None = None
    max_turns: int = Field(10, gt=0, le=200)

    _one_item = field_validator("tools", mode="before")(_one_item_list)

    @model_validator(mode="after")
    def _one_allow_list(self) -> Self:
        if (self.toolset is None) == (self.tools is None):
            raise ValueError("an agent needs exactly one of tools: [globs] or toolset: NAME")
        if self.tools is not None and not self.tools:
            raise ValueError("tools: an empty list allows nothing; list the tools the agent may use")
        return self


class AgentsSection(RootModel[dict[str, AgentConfig]]):
    """The ``agents:`` mapping as read from one file (names checked; merged agent by agent)."""

    @model_validator(mode="after")
    def _names(self) -> Self:
        for name in self.root:
            if not re.fullmatch(SERVER_NAME_PATTERN, name):
                raise ValueError(f"agent name {name!r} must match {SERVER_NAME_PATTERN} (it names the tool ask_{name})")
        return self


def _named_agents(value: object) -> object:
    if isinstance(value, dict):
        entries = (v.model_dump(exclude_unset=True) if isinstance(v, AgentConfig) else v for v in value.values())
        return tuple({**entry, "name": name} for name, entry in zip(value, entries, strict=True))
    return value


class Config(_Frozen):
    """The merged configuration of every source.

    Attributes:
        servers: every configured server, in the order the sources define them.
        sources: the files that were read, in precedence order (lowest first).
        warnings: problems that were tolerated (keys of other hosts, renamed servers).
        secret_values: values substituted from the environment; masked wherever text is shown.
    """

    servers: tuple[ServerConfig, ...] = ()
    settings: Settings = Settings()
    security: SecurityConfig = SecurityConfig()
    llm: LLMConfig = LLMConfig()
    toolsets: dict[str, ToolsetConfig] = Field(default_factory=dict)
    discovery: DiscoveryConfig = DiscoveryConfig()
    storage: StorageConfig = StorageConfig()
    agents: tuple[AgentConfig, ...] = ()  # given as a mapping of name to entry
    sources: tuple[str, ...] = ()
    secret_values: frozenset[str] = Field(default=frozenset(), exclude=True, repr=False)
    warnings: tuple[str, ...] = Field(default=(), exclude=True)

    _agents_by_name = field_validator("agents", mode="before")(_named_agents)

    def agent(self, name: str) -> AgentConfig:
        """The agent called ``name``.

        Raises:
            UsageError: no such agent (the configured ones are named).
        """
        from mcpmux.errors import UsageError

        for agent in self.agents:
            if agent.name == name:
                return agent
        known = ", ".join(a.name for a in self.agents) or "none"
        raise UsageError(
            f"no agent {name!r} is configured (agents: {known})", hint="add it under agents: in mcpmux.yaml"
        )

    def server(self, name: str) -> ServerConfig:
        """Return the server called ``name``.

        Raises:
            ServerNotConfigured: no such server.
        """
        from mcpmux.errors import ServerNotConfigured

        for server in self.servers:
            if server.name == name:
                return server
        raise ServerNotConfigured(name, [s.name for s in self.servers])

    @property
    def enabled_servers(self) -> tuple[ServerConfig, ...]:
        """The servers with ``enabled: true``."""
        return tuple(s for s in self.servers if s.enabled)
