"""Turn an MCP registry ``server.json`` manifest into a server entry.

A manifest names packages (npm, pypi, oci: run with npx, uvx or docker) and remotes (Streamable
HTTP or SSE endpoints). mcpmux takes the first package it can run over stdio, else the first
remote. Every environment variable the manifest declares becomes a ``${VAR}`` reference, so a
required variable that is unset is reported by the normal interpolation check, and a secret is
never copied into the configuration.
"""

from __future__ import annotations

import re
from typing import Any

from mcpmux.config.document import Document, RawServer
from mcpmux.types.json_shapes import JSONObject

__all__ = ["registry_server"]

_RUNNERS = {"npm": "npx", "pypi": "uvx", "oci": "docker"}


def registry_server(manifest: JSONObject, doc: Document) -> None:
    """Add the server that ``manifest`` describes to ``doc`` (or a problem saying why not)."""
    raw_name = manifest.get("name") or "server"
    if not isinstance(raw_name, str):
        doc.problem(("name",), f"expected text, found {type(raw_name).__name__}")
        return
    name = _server_name(raw_name)
    packages = _listed(doc, manifest, "packages")
    for index, package in enumerate(packages):
        runner = package.get("registryType")
        if isinstance(runner, str) and runner in _RUNNERS and _transport_type(package) == "stdio":
            entry = _package_entry(name, package)
            doc.servers.append(RawServer(("packages", index), entry))
            return
    for index, remote in enumerate(_listed(doc, manifest, "remotes")):
        if remote.get("url"):
            doc.servers.append(RawServer(("remotes", index), _remote_entry(name, remote)))
            return
    if not doc.problems:
        doc.problem((), "the manifest has no stdio package (npm, pypi, oci) and no remote with a url")


def _listed(doc: Document, manifest: JSONObject, key: str) -> list[JSONObject]:
    """The mappings listed under ``key`` (a problem if ``key`` holds something else than a list)."""
    items = manifest.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        doc.problem((key,), f"expected a list, found {type(items).__name__}")
        return []
    return [item for item in items if isinstance(item, dict)]


def _server_name(registry_name: str) -> str:
    """``io.github.acme/weather-server`` -> ``weather-server``."""
    last = registry_name.rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9_-]+", "-", last).strip("-_")[:32] or "server"


def _transport_type(package: JSONObject) -> str:
    transport = package.get("transport")
    kind = transport.get("type") if isinstance(transport, dict) else transport
    return str(kind or "stdio")


def _package_entry(name: str, package: JSONObject) -> JSONObject:
    registry_type = str(package["registryType"])
    identifier = str(package.get("identifier") or package.get("name") or "")
    version = str(package.get("version") or "")
    runner = str(package.get("runtimeHint") or _RUNNERS[registry_type])
    env = {v["name"]: _reference(v) for v in _variables(package.get("environmentVariables"))}
    runtime_args = _arguments(package.get("runtimeArguments"))
    package_args = _arguments(package.get("packageArguments"))
    if registry_type == "npm":
        spec = f"{identifier}@{version}" if version else identifier
        args = [*runtime_args, *(["-y"] if "-y" not in runtime_args else []), spec, *package_args]
    elif registry_type == "pypi":
        spec = f"{identifier}=={version}" if version else identifier
        args = [*runtime_args, spec, *package_args]
    else:
        image = f"{identifier}:{version}" if version and ":" not in identifier else identifier
        env_flags = [flag for var in env for flag in ("-e", var)]
        args = ["run", "-i", "--rm", *runtime_args, *env_flags, image, *package_args]
    return {"name": name, "type": "stdio", "command": runner, "args": args, "env": env}


def _remote_entry(name: str, remote: JSONObject) -> JSONObject:
    kind = str(remote.get("type") or "streamable-http")
    headers = {h["name"]: _reference(h) for h in _variables(remote.get("headers"))}
    return {
        "name": name,
        "type": "sse" if kind == "sse" else "http",
        "url": remote["url"],
        "headers": headers,
    }


def _variables(items: Any) -> list[JSONObject]:
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)]


def _reference(variable: JSONObject) -> str:
    """A declared variable as a reference: ``${NAME}``, or ``${NAME:-default}`` when optional."""
    if variable.get("value") is not None and not variable.get("isSecret"):
        return str(variable["value"])
    var = re.sub(r"[^A-Za-z0-9_]", "_", variable["name"]).upper()
    default = variable.get("default")
    if default is not None and not variable.get("isRequired"):
        return f"${{{var}:-{default}}}"
    if not variable.get("isRequired") and default is None:
        return f"${{{var}:-}}"
    return f"${{{var}}}"


def _arguments(items: Any) -> list[str]:
    out: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            value = item.get("value", item.get("default"))
            if item.get("type") == "named" and item.get("name"):
                out.append(str(item["name"]))
            if value is not None:
                out.append(str(value))
    return out
