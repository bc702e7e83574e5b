"""What a network caller may register or change through ``/api/sources`` (and the console's sources page).

A caller known by a token is someone on the network, not the user at this machine, so (issue 43):

- no source that starts a process on the host (stdio, a package manifest, a local plugin), nor a
  change of such a source's environment (``LD_PRELOAD`` would restart its child with it), unless the
  host was started with ``--allow-process-sources``;
- no source whose URLs reach this host's own network: every URL it would connect to (the source's
  ``url``, an MCP server's ``url`` of any scheme, ``http``, ``ws`` or ``tcp``, an OpenAPI ``base_url``),
  as written and as its ``${VAR}`` references expand, must resolve to public addresses only;
- no setting that reads the host's secrets or opens its network: ``allow_private_network``, and an
  OAuth block's ``allow_private_addresses``, ``assertion_file`` or ``assertion_env``;
- no OpenAPI document from a host path (``file://`` or a bare path): a file of the host's.

The user at the machine (no token) may do all of it. Each refusal is a 403 problem that says why.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio

from mcpmux.api.runtime import ApiRuntime
from mcpmux.config.models import OpenAPIServerConfig, ServerConfig, StdioServerConfig
from mcpmux.errors import MCPMuxError
from mcpmux.sources.models import Source, SourceSpec
from mcpmux.web.problems import ApiProblem

__all__ = ["HOST_SECRET_KEYS", "refuse_environment_change", "refuse_for_network", "refuse_processes"]

HOST_SECRET_KEYS = ("allow_private_addresses", "assertion_file", "assertion_env")
"""Keys of a server's OAuth block that read the host's secrets or open its network."""

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_PROCESS_HINT = "register it there (`mcpmux sources add`) or start the API with --allow-process-sources"


def refuse_processes(rt: ApiRuntime, spec: SourceSpec) -> None:
    """A network caller may not make this host start a program, unless the host allowed it."""
    if rt.allow_process_sources:
        return
    stdio = spec.config.get("type", "stdio" if "command" in spec.config else None) == "stdio"
    manifest = spec.manifest is not None or ((spec.url or "").startswith("file://") and spec.source_type == "mcp")
    if stdio or manifest:
        raise ApiProblem(403, "Forbidden", f"this source would start a process on the host; {_PROCESS_HINT}")


async def refuse_for_network(spec: SourceSpec) -> None:
    """Refuses a source that would read the host's secrets or reach its own network (server-side request forgery)."""
    if spec.config.get("allow_private_network"):
        raise ApiProblem(403, "Forbidden", "allow_private_network may be set only by the local user")
    _refuse_host_secrets(spec.config.get("auth"))
    server = _materialised(spec)
    if server is not None:
        _refuse_host_secrets(_auth_of(server))
    documents = [spec.url] if spec.source_type == "openapi" else []
    if isinstance(server, OpenAPIServerConfig):
        documents.append(server.spec)
    _refuse_host_paths(documents)
    await _refuse_private_urls([spec.url, spec.config.get("base_url"), spec.config.get("url"), *_urls_of(server)])


async def refuse_environment_change(rt: ApiRuntime, source: Source, environment: Mapping[str, str]) -> None:
    """A network caller's change of ``source``'s variable values: not for a process, and no URL turned inward."""
    server = await rt.registry_call(rt.registry.server_config, source, environment)
    if isinstance(server, StdioServerConfig) and not rt.allow_process_sources:
        detail = f"{source.name!r} runs a process on the host: only the local user may change its environment"
        raise ApiProblem(403, "Forbidden", f"{detail}; {_PROCESS_HINT}")
    await _refuse_private_urls(_urls_of(server))


def _materialised(spec: SourceSpec) -> ServerConfig | None:
    """The server ``spec`` would run, its references expanded; ``None``: it does not build (the registry says why)."""
    from mcpmux.sources.entries import materialise, prepare

    try:
        prepared = prepare(spec)
        return materialise(spec.name, prepared.entry, {**prepared.plain, **prepared.secrets}, spec.lifecycle)
    except MCPMuxError:
        return None


def _urls_of(server: ServerConfig | None) -> list[str]:
    if isinstance(server, OpenAPIServerConfig):
        return [u for u in (server.base_url, str(server.spec)) if u]
    url = getattr(server, "url", None)
    return [url] if isinstance(url, str) else []


def _auth_of(server: ServerConfig) -> Any:
    auth: Any = getattr(server, "auth", None)
    return auth.model_dump() if auth is not None and hasattr(auth, "model_dump") else auth


def _refuse_host_paths(documents: Iterable[str | None]) -> None:
    """An OpenAPI document named by a ``file://`` URL or a path is a file of the host's: the local user's alone."""
    for document in documents:
        if document and (document.lower().startswith("file:") or "://" not in document):
            detail = f"{document!r} is a file of the host's: only the local user may register a document from a path"
            raise ApiProblem(403, "Forbidden", f"{detail}; serve it over https, or add it there (`mcpmux sources add`)")


def _refuse_host_secrets(auth: Any) -> None:
    if not isinstance(auth, Mapping):
        return
    named = [key for key in HOST_SECRET_KEYS if auth.get(key)]
    if named:
        detail = f"{', '.join(named)} read the host's secrets or open its network: only the local user may set them"
        raise ApiProblem(403, "Forbidden", detail)


async def _refuse_private_urls(urls: Iterable[object]) -> None:
    """Every URL with a host (any scheme but ``file``) must resolve to public addresses only."""
    from mcpmux.servers.openapi.execute import is_public_address

    # A URL with ${VAR} in it is checked as it expands (the materialised server's), not as written.
    for url in {u for u in urls if isinstance(u, str) and "://" in u and "${" not in u}:
        try:
            parts = urlsplit(url)
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower(), 0)
        except ValueError as exc:
            raise ApiProblem(422, "Unprocessable", f"{url!r} is not a URL: {exc}") from exc
        if parts.scheme.lower() == "file" or not parts.hostname:
            continue
        try:
            infos = await anyio.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ApiProblem(422, "Unreachable", f"cannot resolve {parts.hostname!r}: {exc}") from exc
        private = sorted({str(i[4][0]) for i in infos if not is_public_address(str(i[4][0]))})
        if private:
            detail = (
                f"{url} resolves to a non-public address ({', '.join(private)}); only the local user "
                "may register sources on this host's own network"
            )
            raise ApiProblem(403, "Forbidden", detail)
