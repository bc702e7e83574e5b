"""Find, read, merge and validate configuration: the only way code gets a :class:`Config`.

Precedence, later overriding earlier: built-in defaults < user file < project file < ``--config
PATH`` / ``MCPMUX_CONFIG``; the project file counts only once the user trusts it (:mod:`mcpmux.config.trust`).
Servers merge by name (a later entry replaces an earlier one whole);
``settings``, ``security`` and ``llm`` merge key by key. Every problem of every source is collected
and raised together as one :class:`ConfigError`.
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from mcpmux.config.display import looks_secret
from mcpmux.config.formats import Document, RawServer, normalise_document
from mcpmux.config.interpolate import expand
from mcpmux.config.models import (
    AgentsSection,
    BuiltinServerConfig,
    Config,
    DiscoveryConfig,
    LLMConfig,
    OpenAPIServerConfig,
    SecurityConfig,
    ServerConfig,
    Settings,
    SseServerConfig,
    StdioServerConfig,
    StorageConfig,
    StreamableHttpServerConfig,
    TcpServerConfig,
    ToolsetConfig,
    ToolsetsSection,
    WebSocketServerConfig,
)
from mcpmux.config.parse import PathPart, format_path, line_of, read_data
from mcpmux.config.paths import ConfigSource, config_sources
from mcpmux.config.trust import check_project
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.types.json_shapes import JSONObject

__all__ = ["DEFAULT_SERVERS", "ConfigSource", "config_sources", "load_config", "load_file"]

logger = logging.getLogger(__name__)

DEFAULT_SERVERS: tuple[JSONObject, ...] = (
    {"name": "workspace", "type": "builtin"},
    {"name": "content_store", "type": "builtin"},
)
_INTERPOLATED = ("env", "headers", "args", "url", "auth", "spec", "base_url")
_SERVER_ADAPTER: TypeAdapter[ServerConfig] = TypeAdapter(ServerConfig)
_MODELS: dict[str, type[BaseModel]] = {
    "stdio": StdioServerConfig,
    "sse": SseServerConfig,
    "http": StreamableHttpServerConfig,
    "websocket": WebSocketServerConfig,
    "tcp": TcpServerConfig,
    "builtin": BuiltinServerConfig,
    "openapi": OpenAPIServerConfig,
}
_SECTION_MODELS: dict[str, type[BaseModel]] = {
    "settings": Settings,
    "security": SecurityConfig,
    "llm": LLMConfig,
    "toolsets": ToolsetsSection,
    "discovery": DiscoveryConfig,
    "agents": AgentsSection,
    "storage": StorageConfig,
}
_MIN_SECRET_LEN = 4
# Variables whose values describe the machine, not a credential: interpolating them masks nothing.
_PUBLIC_VARIABLES = frozenset(
    {"HOME", "USER", "LOGNAME", "PWD", "OLDPWD", "PATH", "SHELL", "LANG", "TZ", "TMPDIR", "TERM", "workspaceFolder"}
)


def load_config(
    explicit: Path | str | None = None,
    *,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load the merged configuration of every source.

    A project file (``./mcpmux.yaml``) is used only when this user trusts what it says
    (:mod:`mcpmux.config.trust`).

    Raises:
        ConfigError: any source is unreadable or invalid (every problem listed), or an explicit
            file does not exist.
        UntrustedConfigError: the project file is not trusted (or changed since it was).
    """
    sources = config_sources(explicit, cwd=cwd)
    present = [s for s in sources if s.exists]
    for source in sources:
        if source.role in ("--config", "MCPMUX_CONFIG") and not source.exists:
            raise ConfigError(ConfigProblem(str(source.path), "", f"file given by {source.role} does not exist"))
    env = os.environ if environ is None else environ
    if not present:
        return _build([_defaults_document()], env)
    documents, problems = [], []
    for source in present:
        try:
            tree = read_data(source.path)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        document = normalise_document(tree, str(source.path), source.path)
        if source.role == "project" and not _named_explicitly(source, sources):
            check_project(source.path, document, env)  # a cloned repository's file runs nothing unasked
        documents.append(document)
    if problems:
        raise ConfigError(problems)
    return _build(documents, env)


def _named_explicitly(project: ConfigSource, sources: list[ConfigSource]) -> bool:
    """The project file is also the ``--config``/``MCPMUX_CONFIG`` file: the user named it, so it is theirs."""
    named = [s.path for s in sources if s.role in ("--config", "MCPMUX_CONFIG")]
    return any(path.resolve() == project.path.resolve() for path in named)


def load_file(path: Path | str, *, environ: Mapping[str, str] | None = None) -> Config:
    """Load one file on its own (``mcpmux config validate FILE``), with no other source.

    Raises:
        ConfigError: the file is unreadable or invalid.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(ConfigProblem(str(path), "", "no such file"))
    document = normalise_document(read_data(path), str(path), path)
    return _build([document], os.environ if environ is None else environ)


def _defaults_document() -> Document:
    doc = Document("<defaults>", "mcpmux", None)
    doc.servers = [RawServer(("mcp", "servers", i), dict(s)) for i, s in enumerate(DEFAULT_SERVERS)]
    return doc


def _build(documents: list[Document], environ: Mapping[str, str]) -> Config:
    problems: list[ConfigProblem] = []
    warnings: list[ConfigProblem] = []
    servers: dict[str, ServerConfig] = {}
    sections: dict[str, JSONObject] = {key: {} for key in _SECTION_MODELS}
    secrets: set[str] = set()
    for doc in documents:
        problems.extend(doc.problems)
        warnings.extend(doc.warnings)
        for server in _servers_of(doc, environ, secrets, problems, warnings):
            servers.pop(server.name, None)  # a later file's entry replaces an earlier one whole, and moves last
            servers[server.name] = server
        for key, (origin, value) in doc.sections.items():
            if key == "llm":
                value = _expand_api_key(doc, origin, value, environ, secrets, warnings)
            elif key == "storage":
                value = _expand_storage_url(doc, origin, value, environ, secrets, problems)
            section = _section(doc, key, origin, value, problems)
            if section is not None:
                sections[key].update(section)
    problems += _agent_problems(sections)
    if problems:
        raise ConfigError(problems)
    for warning in warnings:
        logger.warning("config: %s", warning)
    return Config(
        servers=tuple(servers.values()),
        settings=Settings.model_validate(sections["settings"]),
        security=SecurityConfig.model_validate(sections["security"]),
        llm=LLMConfig.model_validate(sections["llm"]),
        toolsets={name: ToolsetConfig.model_validate(t) for name, t in sections["toolsets"].items()},
        discovery=DiscoveryConfig.model_validate(sections["discovery"]),
        storage=StorageConfig.model_validate(sections["storage"]),
        agents=sections["agents"],
        sources=tuple(d.source for d in documents),
        secret_values=frozenset(s for s in secrets if len(s) >= _MIN_SECRET_LEN),
        warnings=tuple(str(w) for w in warnings),
    )


def _servers_of(
    doc: Document,
    environ: Mapping[str, str],
    secrets: set[str],
    problems: list[ConfigProblem],
    warnings: list[ConfigProblem],
) -> list[ServerConfig]:
    """The valid servers of one file, in its order; a name used twice in it is a problem (the first stands)."""
    found: list[ServerConfig] = []
    seen: dict[str, str] = {}
    for raw in doc.servers:
        server = _server(doc, raw, environ, secrets, problems, warnings)
        if server is None:
            continue
        if server.name in seen:
            reason = f"duplicate server name {server.name!r} (first at {seen[server.name]})"
            problems.append(_problem(doc, raw.origin, reason, server=raw))
            continue
        seen[server.name] = format_path(raw.origin)
        found.append(server)
    return found


def _server(
    doc: Document,
    raw: RawServer,
    environ: Mapping[str, str],
    secrets: set[str],
    problems: list[ConfigProblem],
    warnings: list[ConfigProblem],
) -> ServerConfig | None:
    """The server of ``raw``, expanded; ``None`` (and its problems) when it is invalid.

    A server whose references name unset variables is not a problem of the whole configuration:
    it is returned with those references as written and marked (:attr:`unresolved`), so that only
    it fails when started.
    """
    data = dict(raw.data)
    name = data.get("name") if isinstance(data.get("name"), str) else None
    missing: list[tuple[str, ConfigProblem]] = []
    unresolved_fields = set()
    mine: set[str] = set()
    for key in _INTERPOLATED:
        if key in data:
            before = len(missing)
            data[key] = _expand_field(doc, raw, (*raw.origin, key), data[key], environ, mine, missing)
            if len(missing) > before:
                unresolved_fields.add(key)
    if data.get("type") == "openapi" and isinstance(data.get("spec"), str):
        data["spec"] = _beside(doc.source, data["spec"])
    mine = {s for s in mine | _secret_looking(data) if len(s) >= _MIN_SECRET_LEN}
    secrets.update(mine)
    data["secret_values"] = frozenset(mine)
    try:
        server = _validate_server(data, unresolved_fields)
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, raw.origin, exc, data, name=name))
        return None
    if not missing:
        return server
    if not server.enabled:
        warnings.extend(problem for _, problem in missing)
    return server.with_unresolved(missing)


def _secret_looking(data: JSONObject) -> set[str]:
    """Values of a server entry that are secrets whether or not they came from ``${VAR}``: header values
    (credentials far more often than not: Authorization, X-Api-Key, ...), an auth block's token, password
    or value, and ``env`` values whose name or shape says secret."""
    found: set[str] = set()
    if isinstance(data.get("headers"), dict):
        found.update(v for v in data["headers"].values() if isinstance(v, str))
    auth = data.get("auth")
    if isinstance(auth, dict):
        found.update(str(auth[k]) for k in ("token", "password", "value") if isinstance(auth.get(k), str))
    if isinstance(data.get("env"), dict):
        found.update(v for k, v in data["env"].items() if isinstance(v, str) and looks_secret(str(k), v))
    return found


def _beside(source: str, spec: str) -> str:
    """A relative ``spec:`` path is relative to the file that names it (a URL stays as it is)."""
    if "://" in spec or spec.startswith(("~", "$")) or Path(spec).is_absolute() or not Path(source).is_file():
        return spec
    return str(Path(source).resolve().parent / spec)


def _validate_server(data: JSONObject, unresolved_fields: set[str]) -> ServerConfig:
    """Validate one entry; an unresolved ``url`` is checked as a placeholder of the right scheme."""
    url = data.get("url")
    schemes: tuple[str, ...] = getattr(_MODELS.get(str(data.get("type"))), "schemes", ())
    if "url" in unresolved_fields and isinstance(url, str) and schemes:
        server = _SERVER_ADAPTER.validate_python({**data, "url": f"{schemes[0]}://unresolved.invalid/"})
        return server.model_copy(update={"url": url})
    return _SERVER_ADAPTER.validate_python(data)


def _expand_field(
    doc: Document,
    raw: RawServer,
    origin: tuple[PathPart, ...],
    value: Any,
    environ: Mapping[str, str],
    secrets: set[str],
    missing: list[tuple[str, ConfigProblem]],
) -> Any:
    if isinstance(value, str):
        result = expand(value, environ)
        key = str(origin[-1]) if origin else ""
        # Every value that came from the environment is a secret, whatever its name or shape (a plain
        # ``${KEY}`` in a url query is as secret as ``${GITHUB_TOKEN}``), except the machine's own
        # well-known variables; a value named or shaped like a credential counts even then.
        secrets.update(
            v
            for var, v in result.substituted
            if var not in _PUBLIC_VARIABLES or looks_secret(var, v) or looks_secret(key, v)
        )
        field = format_path(origin[len(raw.origin) :])
        name = raw.data.get("name")
        label = f"server {name!r}"
        for var in result.missing:
            problem = _problem(doc, origin, f"{var.reason} ({label}, field {field})", server=raw)
            missing.append((var.name, problem))
        return result.value
    if isinstance(value, list):
        return [_expand_field(doc, raw, (*origin, i), v, environ, secrets, missing) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: _expand_field(doc, raw, (*origin, k), v, environ, secrets, missing) for k, v in value.items()}
    return value


def _expand_api_key(
    doc: Document,
    origin: tuple[PathPart, ...],
    value: Any,
    environ: Mapping[str, str],
    secrets: set[str],
    warnings: list[ConfigProblem],
) -> Any:
    """``llm.api_key: ${VAR}`` is expanded too; unset, it is dropped with a warning (only chat needs it)."""
    if not isinstance(value, dict) or not isinstance(value.get("api_key"), str):
        return value
    result = expand(value["api_key"], environ)
    value = dict(value)
    if result.missing:
        warnings.append(_problem(doc, (*origin, "api_key"), f"{result.missing[0].reason}; no API key configured"))
        value.pop("api_key")
    else:
        secrets.add(result.value)  # an API key is a secret whatever its shape
        value["api_key"] = result.value
    return value


def _expand_storage_url(
    doc: Document,
    origin: tuple[PathPart, ...],
    value: Any,
    environ: Mapping[str, str],
    secrets: set[str],
    problems: list[ConfigProblem],
) -> Any:
    """``storage.url`` may hold ``${VAR}`` (a password): expanded, and the expanded parts are masked.

    An unset variable is an error: the rows would otherwise go to another database unnoticed.
    """
    if not isinstance(value, dict) or not isinstance(value.get("url"), str):
        return value
    result = expand(value["url"], environ)
    if result.missing:
        problems.append(_problem(doc, (*origin, "url"), result.missing[0].reason))
        return {key: item for key, item in value.items() if key != "url"}
    secrets.update(found for name, found in result.substituted if name not in _PUBLIC_VARIABLES)
    return {**value, "url": result.value}


def _agent_problems(sections: Mapping[str, JSONObject]) -> list[ConfigProblem]:
    """An agent's ``toolset:`` must name a toolset of the configuration, when it has a ``toolsets:`` section.

    Hook for the toolsets section (issue 22, part A): checked by name only, against the merged
    ``sections["toolsets"]`` when the loader has one; the toolset's own validation stays there.
    """
    toolsets = sections.get("toolsets")
    if toolsets is None:
        return []
    return [
        ConfigProblem("<config>", f"agents.{name}.toolset", f"no toolset {agent['toolset']!r} (toolsets: {known})")
        for name, agent in sections["agents"].items()
        if isinstance(agent, dict) and agent.get("toolset") and agent["toolset"] not in toolsets
        for known in [", ".join(sorted(toolsets)) or "none"]
    ]


def _section(
    doc: Document, key: str, origin: tuple[PathPart, ...], value: Any, problems: list[ConfigProblem]
) -> JSONObject | None:
    if value is None:
        return {}
    model = _SECTION_MODELS[key]
    try:
        return model.model_validate(value).model_dump(exclude_unset=True)
    except ValidationError as exc:
        problems.extend(_validation_problems(doc, origin, exc, value))
        return None


def _validation_problems(
    doc: Document, origin: tuple[PathPart, ...], exc: ValidationError, data: Any, *, name: str | None = None
) -> list[ConfigProblem]:
    out = []
    kind = data.get("type") if isinstance(data, dict) else None
    for error in exc.errors(include_input=False, include_url=False):
        loc = list(error["loc"])
        if loc and isinstance(kind, str) and loc[0] == kind:
            loc = loc[1:]
        reason = _reason(error["type"], error["msg"], loc, data, kind)
        where = (*origin, *[p for p in loc if isinstance(p, str | int)])
        out.append(_problem(doc, where, reason, label=(len(origin), name)))
    return out


def _reason(error_type: str, message: str, loc: list[Any], data: Any, kind: Any) -> str:
    if error_type in ("union_tag_invalid", "union_tag_not_found"):
        expected = "stdio, sse, http, websocket, tcp, builtin, openapi"
        return (
            f"unknown server type {kind!r} (expected one of: {expected})" if kind else f"type is required ({expected})"
        )
    if error_type == "missing":
        return f"required for type {kind!r}" if kind else "required"
    if error_type == "extra_forbidden":
        field = str(loc[-1]) if loc else ""
        known = _known_keys(kind)
        close = difflib.get_close_matches(field, known, n=1)
        return "unknown key" + (f" (did you mean {close[0]!r}?)" if close else "")
    return message.removeprefix("Value error, ")


def _known_keys(kind: Any) -> list[str]:
    model = _MODELS.get(str(kind))
    return list(model.model_fields) if model else []


def _problem(
    doc: Document,
    origin: tuple[PathPart, ...],
    reason: str,
    *,
    server: RawServer | None = None,
    label: tuple[int, str | None] | None = None,
) -> ConfigProblem:
    """A problem at ``origin``; inside a server given by index, its path names the server too.

    ``mcp.servers[3] (github).env.TOKEN`` says which server even when the file lists them.
    """
    line, column = line_of(doc.tree, origin)
    if server is not None:
        name = server.data.get("name")
        label = (len(server.origin), name if isinstance(name, str) else None)
    return ConfigProblem(doc.source, _labelled_path(origin, label), reason, line, column)


def _labelled_path(origin: tuple[PathPart, ...], label: tuple[int, str | None] | None) -> str:
    if (
        label is None
        or label[1] is None
        or not 0 < label[0] <= len(origin)
        or not isinstance(origin[label[0] - 1], int)
    ):
        return format_path(origin)
    size, name = label
    rest = format_path(origin[size:])
    return f"{format_path(origin[:size])} ({name})" + ("." + rest if rest and not rest.startswith("[") else rest)
