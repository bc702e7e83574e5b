"""``mcpmux serve`` as one value: what it is told (:class:`ServeConfig`) and what that builds (:class:`Prepared`).

uvicorn's ``Config`` is the model: the command line maps its options onto a :class:`ServeConfig`
field for field and does nothing else; :meth:`ServeConfig.prepare` checks the combination (every
problem a :class:`~mcpmux.errors.UsageError` or :class:`~mcpmux.errors.ConfigError` before anything
starts), loads the configuration once, opens the state store and builds the faces' options; a
program can do the same without the CLI::

    prepared = ServeConfig(http="127.0.0.1:8765", config_path=Path("mcpmux.yaml")).prepare()
    try:
        anyio.run(prepared.serve)
    finally:
        prepared.close()
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpmux.config import Config, load_config
from mcpmux.errors import ConfigError, ConfigProblem, UsageError
from mcpmux.provider_names import DEFAULT_SEPARATOR
from mcpmux.web.slowloris import DEFAULT_HEADER_TIMEOUT_S

if TYPE_CHECKING:
    from mcpmux.policy import StateStore
    from mcpmux.serve.cluster import ReplicaOptions
    from mcpmux.serve.run import ServeOptions
    from mcpmux.web.introspection import Introspector
    from mcpmux.web.oauth_resource import ExternalTokens
    from mcpmux.web.security import HttpSecurity
    from mcpmux.web.tokens import TokenStore

__all__ = ["CLIENT_SECRET_ENV", "DEFAULT_MAX_BODY", "Prepared", "ServeConfig", "address"]

CLIENT_SECRET_ENV = "MCPMUX_OAUTH_CLIENT_SECRET"
DEFAULT_MAX_BODY = 4 * 1024 * 1024


def address(option: str, value: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT`` (``:PORT`` alone is loopback; ``[::1]:PORT`` for IPv6).

    Raises:
        UsageError: not ``HOST:PORT``, naming ``option``.
    """
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"{option}: {value!r} is not HOST:PORT")
    return (host.strip("[]") or "127.0.0.1"), int(port)


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``mcpmux serve`` is told, as values; each field is the option of the same name.

    Addresses are ``HOST:PORT`` strings as typed; ``api`` and ``ui`` are the negations of
    ``--no-api`` and ``--no-ui``; ``config_path`` is ``--config`` (``None``: the usual search).
    """

    stdio: bool = False
    http: str | None = None
    sse: bool = False
    json_response: bool = False
    tcp: str | None = None
    tcp_without_tokens: bool = False
    ws: str | None = None
    separator: str = DEFAULT_SEPARATOR
    auth: bool = False
    api: bool = True
    ui: bool = True
    allow_process_sources: bool = False
    db_url: str | None = None
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    max_body: int = DEFAULT_MAX_BODY
    drain_timeout_s: float = 10.0
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    oauth_issuer: str | None = None
    oauth_resource: str | None = None
    oauth_client_id: str | None = None
    oauth_introspection: str | None = None
    oauth_introspection_ttl_s: float = 30.0
    oauth_groups_claim: str = "groups"
    oauth_allow_private: bool = False
    agents: tuple[str, ...] = ()
    toolset: str | None = None
    expose: tuple[str, ...] = ()
    replica_id: str | None = None
    advertise: str | None = None
    config_path: Path | str | None = None

    def check(self) -> None:
        """The combinations of options that cannot work, each a :class:`UsageError` (nothing is loaded)."""
        needs_http = [
            ("--sse and --json-response need --http", self.sse or self.json_response),
            ("--replica-id and --advertise need --http (replicas forward over HTTP)",
             self.replica_id is not None or self.advertise is not None),
        ]  # fmt: skip
        for message, asked in needs_http:
            if asked and self.http is None:
                raise UsageError(message)
        if (self.oauth_issuer is None) != (self.oauth_resource is None):
            raise UsageError("--oauth-issuer and --oauth-resource go together")
        if self.oauth_issuer is None and (self.oauth_client_id or self.oauth_introspection):
            raise UsageError("--oauth-client-id and --oauth-introspection need --oauth-issuer and --oauth-resource")
        if self.oauth_introspection is not None and self.oauth_client_id is None:
            raise UsageError("--oauth-introspection needs --oauth-client-id (the client allowed to introspect)")
        if self.expose and (self.toolset is not None or self.agents):
            raise UsageError("--expose serves its own subset: not with --toolset or --agent")
        if self.allow_process_sources and not self.serves_api:
            raise UsageError("--allow-process-sources needs --http and the REST API (not --no-api or --agent)")

    @property
    def serves_api(self) -> bool:
        """The REST API at /api: with --http, unless --no-api, --agent or --expose (it would show every tool)."""
        return self.http is not None and self.api and not self.agents and not self.expose

    @property
    def serves_ui(self) -> bool:
        """The console at /ui: with --http, unless --no-ui, --agent or --expose (it would show every tool)."""
        return self.http is not None and self.ui and not self.agents and not self.expose

    def prepare(self, *, redact: Callable[[frozenset[str]], None] = lambda _secrets: None) -> Prepared:
        """Check, load the configuration (once), open the state store and build the faces' options.

        ``redact`` is told every secret value as it becomes known (the CLI masks them in its output).

        Raises:
            UsageError: options that cannot go together, an address that is not ``HOST:PORT``.
            ConfigError: the configuration, an unknown agent or toolset, an address off loopback without
                tokens, a tcp face with tokens.
        """
        from mcpmux.gateway.http import HttpOptions
        from mcpmux.policy import StateStore
        from mcpmux.policy.toolsets import toolset_named
        from mcpmux.serve.run import ServeOptions
        from mcpmux.sources.merge import with_registered
        from mcpmux.web.tokens import TokenStore

        self.check()
        http = None if self.http is None else address("--http", self.http)
        ws = None if self.ws is None else address("--ws", self.ws)
        replica = self._replica(http)
        allow_hosts = self.allow_hosts if replica is None else (*self.allow_hosts, _netloc(replica.advertise))
        files = load_config(self.config_path)
        config = with_registered(files, self.db_url)
        redact(config.secret_values)
        for name in self.agents:
            config.agent(name)  # an unknown agent is a usage error before anything starts
        if self.toolset is not None:
            toolset_named(config, self.toolset)  # and so is an unknown toolset
        external = self._external_tokens()
        if external is not None and external.introspection is not None:
            redact(config.secret_values | {external.introspection.settings.client_secret})
        store = StateStore.configured(config, self.db_url)
        try:
            tokens = TokenStore(store)

            def rules(option: str, host: str) -> HttpSecurity:
                from mcpmux.serve.run import http_security

                return http_security(
                    host, tokens, require_auth=self.auth, allow_hosts=allow_hosts, allow_origins=self.allow_origins,
                    max_body_bytes=self.max_body, option=option, external=external,
                )  # fmt: skip

            http_options = None
            if http is not None:
                http_options = HttpOptions(
                    host=http[0], port=http[1], security=rules("--http", http[0]), sse=self.sse,
                    json_response=self.json_response, header_timeout_s=self.header_timeout_s,
                )  # fmt: skip
            options = ServeOptions(
                api=_api_factory(files, self.db_url, self.allow_process_sources) if self.serves_api else None,
                console=self._console(config),
                stdio=self.stdio or not (self.http or self.tcp or self.ws),
                http=http_options,
                tcp=self._tcp(tokens),
                ws=ws,
                ws_security=rules("--ws", ws[0]) if ws is not None else None,
                separator=self.separator,
                drain_timeout_s=self.drain_timeout_s,
                agents=self.agents,
                toolset=self.toolset,
                expose=self.expose,
                replica=replica,
            )
        except BaseException:
            store.close()
            raise
        return Prepared(config, store, options, external)

    def _replica(self, http: tuple[str, int] | None) -> ReplicaOptions | None:
        """This gateway as one replica of several (``--replica-id``, ``--advertise``); ``None``: alone."""
        if self.replica_id is None and self.advertise is None:
            return None
        from mcpmux.serve.cluster import ReplicaOptions

        assert http is not None  # check() asked for --http
        return ReplicaOptions.of(self.replica_id, self.advertise, port=http[1])

    def _console(self, config: Config) -> Any:
        """The console's factory (its sources page where the REST API is served); ``None``: no console."""
        if not self.serves_ui:
            return None
        return _console_factory(config, self.db_url, self.serves_api, self.allow_process_sources)

    def _external_tokens(self) -> ExternalTokens | None:
        """The authorization server's tokens (``--oauth-issuer``), with the introspector of ``--oauth-client-id``."""
        if self.oauth_issuer is None or self.oauth_resource is None:
            return None
        from mcpmux.web.oauth_resource import ExternalTokens, OAuthResourceSettings

        settings = OAuthResourceSettings(
            issuer=self.oauth_issuer, resource=self.oauth_resource, groups_claim=self.oauth_groups_claim
        )
        external = ExternalTokens(settings)
        external.introspection = self._introspection(external)
        return external

    def _introspection(self, external: ExternalTokens) -> Introspector | None:
        """The introspector of ``--oauth-client-id`` (its secret from the environment, never the command line)."""
        if self.oauth_client_id is None:
            return None
        from mcpmux.web.introspection import IntrospectionSettings, Introspector

        secret = os.environ.get(CLIENT_SECRET_ENV, "")
        if not secret:
            raise UsageError(f"--oauth-client-id needs its secret in ${CLIENT_SECRET_ENV}")
        settings = IntrospectionSettings(
            self.oauth_client_id, secret, endpoint=self.oauth_introspection, ttl_s=self.oauth_introspection_ttl_s,
            allow_private=self.oauth_allow_private,
        )  # fmt: skip
        return Introspector(settings, issuer=external.settings.issuer, resource=external.settings.resource)

    def _tcp(self, tokens: TokenStore) -> tuple[str, int] | None:
        """The tcp face's address: loopback only, and only where no token is asked for (it cannot check one)."""
        from mcpmux.web.security import is_loopback

        if self.tcp is None:
            return None
        bound = address("--tcp", self.tcp)
        if not is_loopback(bound[0]):
            raise ConfigError(ConfigProblem("<cli>", "--tcp", "the tcp face has no auth: bind a loopback address"))
        if not (self.tcp_without_tokens or not (self.auth or tokens.any())):
            problem = "tokens exist (or --auth), but the tcp face cannot check them: any local process could use it"
            error = ConfigError(ConfigProblem("<cli>", "--tcp", problem))
            error.hint = "serve --ws or --http instead, or pass --tcp-without-tokens to accept that"
            raise error
        return bound


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a :class:`ServeConfig` built: the configuration, its state store (yours to close) and the options."""

    config: Config
    store: StateStore
    options: ServeOptions
    external: ExternalTokens | None = None

    async def serve(self) -> None:
        """Serve until stopped (SIGTERM or SIGINT drain the calls in flight), then stop the upstreams."""
        from mcpmux.serve.run import serve

        if self.external is not None:
            await self.external.load()  # the issuer's keys, before the first request
        await serve(self.config, self.options, store=self.store)

    def close(self) -> None:
        """Close the state store."""
        self.store.close()


def _netloc(url: str) -> str:
    """``HOST:PORT`` of ``url`` as a Host header names it (requests sent to the advertised address)."""
    import httpx

    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"{host}:{port}"


def _api_factory(files: Config, db_url: str | None, allow_process_sources: bool) -> Any:
    """Makes the REST API over the gateway's host (its registry opened now, so a bad --db fails early).

    ``files`` is the configuration files' own (without registered sources): the API shows those read-only.
    """
    from mcpmux.api.serve import mounted_api
    from mcpmux.sources.registry import SourceRegistry

    registry = SourceRegistry.configured(files, db_url)
    return lambda host, security, approver: mounted_api(
        host, security, files, registry, allow_process_sources=allow_process_sources, approver=approver
    )


def _console_factory(config: Config, db_url: str | None, with_sources: bool, allow_process_sources: bool) -> Any:
    """Makes the web console over the gateway's host (with its sources page where the REST API is served).

    Prints the console key while no token exists.
    """
    from mcpmux.console import build_console

    key = secrets.token_urlsafe(24)

    def factory(host: Any, security: Any, pending: Any, replica: Any = None) -> Any:
        from mcpmux.api.runtime import runtime_over
        from mcpmux.sources.registry import SourceRegistry

        sources = None
        if with_sources:
            registry = SourceRegistry.configured(config, db_url)
            sources = runtime_over(
                host, config, registry, tokens=security.tokens, allow_process_sources=allow_process_sources
            )
        if not (security.tokens is not None and security.tokens.any()) and not security.require_token:
            sys.stderr.write(f"mcpmux: console at /ui; no token exists, sign in with the console key {key}\n")
        return build_console(host, security, pending=pending, key=key, sources=lambda: sources, replica=replica)

    return factory
