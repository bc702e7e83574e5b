"""A :class:`SourceSpec` -> the server entry to store, its declared variables and the values to seal.

The stored entry never holds a secret: where a value goes (``env``, ``headers``, an OpenAPI
``auth``), the entry holds a ``${VAR}`` reference, and the value is sealed under that name. Every
problem is a :class:`~mcpmux.errors.SourceError` before anything is stored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter, ValidationError

from mcpmux.canonical_names import SERVER_NAME_PATTERN
from mcpmux.config.formats import Document
from mcpmux.config.interpolate import expand
from mcpmux.config.manifests import registry_server
from mcpmux.config.models import ServerConfig
from mcpmux.errors import SourceError
from mcpmux.sources.models import SourceSpec, Variable

__all__ = ["Prepared", "materialise", "prepare"]

MANIFEST_FILE = "server.json"
_MAX_MANIFEST_BYTES = 1024 * 1024
_OPENAPI_FIELDS = frozenset(
    {
        "base_url",
        "auth",
        "headers",
        "include_tags",
        "exclude_tags",
        "include_operations",
        "exclude_operations",
        "verify_tls",
        "allow_private_network",
        "max_response_bytes",
        "timeout_ms",
        "description",
    }
)
_SERVER: TypeAdapter[ServerConfig] = TypeAdapter(ServerConfig)
_AUTH_SECRETS = {"token": "AUTH_TOKEN", "password": "AUTH_PASSWORD", "value": "AUTH_VALUE"}


@dataclass(frozen=True)
class Prepared:
    """A source ready to store: its entry (references only), variables, plain and secret values."""

    entry: dict[str, Any]
    variables: tuple[Variable, ...]
    plain: dict[str, str]
    secrets: dict[str, str]


def prepare(spec: SourceSpec) -> Prepared:
    """Check ``spec`` and split it into what is stored in clear and what is sealed.

    Raises:
        SourceError: a bad name or type, an unreadable manifest, a required variable without a
            value, or server fields that do not validate.
    """
    if not re.fullmatch(SERVER_NAME_PATTERN, spec.name):
        raise SourceError(spec.name, f"name must match {SERVER_NAME_PATTERN} (lower-case, digits, '_', '-')")
    if spec.source_type == "openapi":
        prepared = _openapi(spec)
    elif spec.source_type == "mcp":
        prepared = _mcp(spec)
    else:
        raise SourceError(spec.name, f"source_type must be 'mcp' or 'openapi', not {spec.source_type!r}")
    missing = [
        v.name for v in prepared.variables if v.is_required and v.name not in {**prepared.plain, **prepared.secrets}
    ]
    if missing:
        raise SourceError(spec.name, f"required variable(s) without a value: {', '.join(missing)}")
    materialise(spec.name, prepared.entry, {**prepared.plain, **prepared.secrets}, spec.lifecycle)
    return prepared


def materialise(name: str, entry: dict[str, Any], values: dict[str, str], lifecycle: str) -> ServerConfig:
    """The server config of a stored entry, its references expanded from ``values``.

    Raises:
        SourceError: a reference without a value, or fields that do not validate.
    """
    missing: list[str] = []

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            result = expand(value, values)
            missing.extend(var.name for var in result.missing)
            return result.value
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    fields = {
        k: fill(v) if k in ("env", "headers", "args", "url", "spec", "base_url", "auth") else v
        for k, v in entry.items()
    }
    if missing:
        raise SourceError(name, f"variable(s) without a value: {', '.join(sorted(set(missing)))}")
    if lifecycle == "transient":
        fields["lifecycle"] = "transient"
    try:
        server = _SERVER.validate_python({**fields, "name": name})
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in exc.errors(include_url=False)]
        raise SourceError(name, "; ".join(problems)) from exc
    secrets = frozenset(v for v in values.values() if len(v) >= 4)
    return server.model_copy(update={"secret_values": secrets})


def _openapi(spec: SourceSpec) -> Prepared:
    unknown = sorted(set(spec.config) - _OPENAPI_FIELDS)
    if unknown:
        raise SourceError(spec.name, f"unknown openapi_config field(s): {', '.join(unknown)}")
    if not spec.url:
        raise SourceError(spec.name, "an openapi source needs url: the document (file:// path or http(s):// URL)")
    location = _local_path(spec.url) if spec.url.startswith("file://") else spec.url
    if not location.lower().startswith(("http://", "https://", "/")):
        raise SourceError(spec.name, "url must be file:///ABSOLUTE/PATH or http(s)://")
    entry: dict[str, Any] = {"type": "openapi", "spec": location, **spec.config}
    secrets = dict(spec.environment)
    auth = entry.get("auth")
    if isinstance(auth, dict):
        auth = dict(auth)
        for field_name, var in _AUTH_SECRETS.items():
            value = auth.get(field_name)
            if isinstance(value, str) and not value.startswith("${"):
                secrets[var], auth[field_name] = value, f"${{{var}}}"
        entry["auth"] = auth
    headers = entry.get("headers")
    if isinstance(headers, dict):
        entry["headers"] = {k: _sealed_reference(f"HEADER_{k}", v, secrets) for k, v in headers.items()}
    variables = tuple(Variable(name=n, is_secret=True) for n in sorted(secrets))
    return Prepared(entry=entry, variables=variables, plain={}, secrets=secrets)


def _mcp(spec: SourceSpec) -> Prepared:
    manifest = spec.manifest
    if manifest is None and spec.url and spec.url.startswith("file://"):
        manifest = _read_manifest(spec.name, Path(_local_path(spec.url)))
    if manifest is not None:
        entry, variables = _from_manifest(spec.name, manifest)
    elif spec.config:
        entry, variables = _from_config(spec)
    elif spec.url and spec.url.lower().startswith(("http://", "https://")):
        entry, variables = {"type": "http", "url": spec.url}, ()
    else:
        raise SourceError(spec.name, "an mcp source needs a server.json (url or manifest), server fields, or a URL")
    plain: dict[str, str] = {}
    secrets: dict[str, str] = {}
    # Literal header and env values of a config-style entry are credentials as often as not: sealed.
    for key in ("headers", "env"):
        values = entry.get(key)
        if isinstance(values, dict):
            prefix = "HEADER_" if key == "headers" else ""
            entry[key] = {k: _sealed_reference(f"{prefix}{k}", v, secrets) for k, v in values.items()}
    declared = {v.name: v for v in variables}
    for name, value in spec.environment.items():
        variable = declared.get(name)
        secret = variable.is_secret if variable is not None else True
        (secrets if secret else plain)[name] = value
    for variable in variables:
        if variable.default is not None and variable.name not in spec.environment:
            plain[variable.name] = variable.default
    return Prepared(entry=entry, variables=variables, plain=plain, secrets=secrets)


def _from_config(spec: SourceSpec) -> tuple[dict[str, Any], tuple[Variable, ...]]:
    entry = {k: v for k, v in spec.config.items() if k not in ("lifecycle_mode", "environment", "name")}
    entry.setdefault("type", "stdio" if "command" in entry else "http")
    if spec.url and "url" not in entry and entry["type"] != "stdio":
        entry["url"] = spec.url
    if entry["type"] in ("builtin", "openapi"):
        raise SourceError(spec.name, f"type {entry['type']!r} is not an mcp source entry")
    if entry["type"] == "stdio":
        env = dict(entry.get("env") or {})
        env.update({name: f"${{{name}}}" for name in spec.environment})
        entry["env"] = env
    variables = tuple(Variable(name=n, is_secret=True) for n in sorted(spec.environment))
    return entry, variables


def _from_manifest(name: str, manifest: dict[str, Any]) -> tuple[dict[str, Any], tuple[Variable, ...]]:
    if not isinstance(manifest, dict):
        raise SourceError(name, "the manifest is not a JSON object")
    doc = Document(source=MANIFEST_FILE, kind="registry", tree=manifest)
    registry_server(manifest, doc)
    if doc.problems or not doc.servers:
        raise SourceError(name, "; ".join(str(p) for p in doc.problems) or "the manifest describes no server")
    raw = doc.servers[0]
    kind, index = raw.origin[0], raw.origin[1]
    chosen = manifest[str(kind)][int(index)]
    declared = chosen.get("environmentVariables") if kind == "packages" else chosen.get("headers")
    variables = tuple(
        Variable(
            name=re.sub(r"[^A-Za-z0-9_]", "_", str(item["name"])).upper(),
            description=str(item.get("description") or ""),
            is_required=bool(item.get("isRequired")),
            is_secret=bool(item.get("isSecret")),
            default=None if item.get("default") is None else str(item["default"]),
        )
        for item in (declared if isinstance(declared, list) else [])
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    )
    entry = {k: v for k, v in raw.data.items() if k != "name"}
    return entry, variables


def _read_manifest(name: str, path: Path) -> dict[str, Any]:
    target = path / MANIFEST_FILE if path.is_dir() else path
    try:
        with target.open("rb") as handle:
            raw = handle.read(_MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise SourceError(name, f"cannot read {target}: {exc.strerror or exc}") from exc
    if len(raw) > _MAX_MANIFEST_BYTES:
        raise SourceError(name, f"{target} is larger than 1 MiB")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise SourceError(name, f"{target} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SourceError(name, f"{target} is not a JSON object")
    return data


def _sealed_reference(var: str, value: Any, secrets: dict[str, str]) -> Any:
    if not isinstance(value, str) or value.startswith("${"):
        return value
    name = re.sub(r"[^A-Za-z0-9_]", "_", var).upper()
    secrets[name] = value
    return f"${{{name}}}"


def _local_path(url: str) -> str:
    return urlsplit(url).path
