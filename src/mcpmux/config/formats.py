"""Recognise a configuration document's format and turn it into mcpmux's own shape.

Formats (detected from the document, never from the file name):

- ``mcpmux``: ``{mcp: {servers: [...], settings, security}, llm: {...}}`` (ours; strict keys);
- ``claude``: ``{mcpServers: {name: {...}}}`` (Claude Desktop, Claude Code ``.mcp.json``, Cursor);
- ``vscode``: ``{servers: {name: {...}}, inputs: [...]}`` (VS Code ``mcp.json``);
- ``servers-array``: ``{servers: [{name, ...}]}`` (the legacy array);
- ``registry``: an MCP registry ``server.json`` manifest (``packages`` / ``remotes``).

Keys that other hosts use and mcpmux does not are warned about and dropped; in our own format an
unknown key is an error, so a typo never silently disables a setting.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcpmux.config.document import Document, RawServer
from mcpmux.config.envfile import read_env_file
from mcpmux.config.manifests import registry_server
from mcpmux.config.parse import PathPart, format_path
from mcpmux.errors import ConfigError, ConfigProblem
from mcpmux.types.json_shapes import JSONObject

__all__ = ["Document", "RawServer", "normalise_document"]

# Keys of a foreign server entry that map straight onto ours.
_FOREIGN_KEYS = {"type", "command", "args", "env", "cwd", "url", "headers", "timeout_ms", "enabled"}
# Keys other hosts use that have no meaning here: dropped without a warning.
# (``envFile`` is read by the VS Code reader itself.)
_QUIET_KEYS = {"description", "envFile", "gallery", "version", "dev"}


def normalise_document(tree: Any, source: str, path: Path | None = None) -> Document:
    """Detect the format of ``tree`` (read from ``source``) and bring it into mcpmux's shape."""
    if tree is None:
        return Document(source, "empty", tree)
    if not isinstance(tree, dict):
        doc = Document(source, "unknown", tree)
        doc.problem((), f"expected a mapping at the top level, found {type(tree).__name__}")
        return doc
    if "mcp" in tree:
        return _ours(tree, source)
    if "mcpServers" in tree:
        return _named_servers(tree, source, "claude", "mcpServers")
    if isinstance(tree.get("servers"), dict):
        return _vscode(tree, source, path)
    if isinstance(tree.get("servers"), list):
        return _servers_array(tree, source)
    if "packages" in tree or "remotes" in tree:
        doc = Document(source, "registry", tree)
        registry_server(tree, doc)
        return doc
    doc = Document(source, "unknown", tree)
    doc.problem((), "not a recognised MCP configuration (expected one of: mcp, mcpServers, servers, packages)")
    return doc


def _ours(tree: JSONObject, source: str) -> Document:
    doc = Document(source, "mcpmux", tree)
    for key in tree:
        if key not in ("mcp", "llm", "toolsets", "discovery", "agents", "storage"):
            doc.warn((key,), "unknown top-level key, ignored")
    for section in ("llm", "toolsets", "discovery", "agents", "storage"):
        if section in tree:
            doc.sections[section] = ((section,), tree[section])
    mcp = tree["mcp"]
    if mcp is None:
        return doc
    if not isinstance(mcp, dict):
        doc.problem(("mcp",), f"expected a mapping, found {type(mcp).__name__}")
        return doc
    for key, value in mcp.items():
        if key in ("settings", "security"):
            doc.sections[key] = (("mcp", key), value)
        elif key != "servers":
            doc.problem(("mcp", key), "unknown key (expected servers, settings, security)")
    servers = mcp.get("servers")
    if isinstance(servers, list):
        for index, entry in enumerate(servers):
            _add_entry(doc, ("mcp", "servers", index), entry, name=None, foreign=False)
    elif isinstance(servers, dict):
        for name, entry in servers.items():
            _add_entry(doc, ("mcp", "servers", name), entry, name=str(name), foreign=False)
    elif servers is not None:
        doc.problem(("mcp", "servers"), f"expected a list of servers, found {type(servers).__name__}")
    return doc


def _named_servers(tree: JSONObject, source: str, kind: str, key: str) -> Document:
    doc = Document(source, kind, tree)
    servers = tree[key]
    if not isinstance(servers, dict):
        doc.problem((key,), f"expected a mapping of server names to entries, found {type(servers).__name__}")
        return doc
    for name, entry in servers.items():
        _add_entry(doc, (key, name), entry, name=str(name), foreign=True)
    return doc


def _vscode(tree: JSONObject, source: str, path: Path | None) -> Document:
    doc = _named_servers(tree, source, "vscode", "servers")
    inputs = tree.get("inputs") or []
    if not isinstance(inputs, list):
        doc.problem(("inputs",), f"expected a list of inputs, found {type(inputs).__name__}")
        inputs = []
    declared = {str(i.get("id")) for i in inputs if isinstance(i, dict)}
    folder = _workspace_folder(path)
    for server in doc.servers:
        server.data = _replace_vscode_vars(server.data, folder)
        entry = tree["servers"].get(server.origin[-1])
        env_file = entry.get("envFile") if isinstance(entry, dict) else None
        if env_file is not None:
            _merge_env_file(doc, server, _replace_vscode_vars(env_file, folder), folder)
        for ref in re.findall(r"\$\{input:([^}]+)\}", repr(server.data)):
            if ref not in declared:
                doc.warn(server.origin, f"${{input:{ref}}} is not declared in inputs")
    return doc


def _merge_env_file(doc: Document, server: RawServer, env_file: Any, folder: str) -> None:
    """VS Code's ``envFile``: its variables join the server's ``env`` (``env`` wins on a clash)."""
    origin = (*server.origin, "envFile")
    if not isinstance(env_file, str) or not env_file:
        doc.problem(origin, "expected the path of a file of KEY=VALUE lines")
        return
    file = Path(env_file).expanduser()
    file = file if file.is_absolute() else Path(folder) / file
    try:
        variables = read_env_file(file)
    except ConfigError as exc:
        doc.problems.extend(ConfigProblem(doc.source, format_path(origin), str(p)) for p in exc.problems)
        return
    env = server.data.get("env")
    server.data["env"] = {**variables, **(env if isinstance(env, dict) else {})}


def _workspace_folder(path: Path | None) -> str:
    if path is None:
        return str(Path.cwd())
    parent = path.resolve().parent
    return str(parent.parent if parent.name == ".vscode" else parent)


def _replace_vscode_vars(value: Any, folder: str) -> Any:
    if isinstance(value, str):
        return value.replace("${workspaceFolder}", folder).replace("${userHome}", str(Path.home()))
    if isinstance(value, list):
        return [_replace_vscode_vars(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _replace_vscode_vars(v, folder) for k, v in value.items()}
    return value


def _servers_array(tree: JSONObject, source: str) -> Document:
    doc = Document(source, "servers-array", tree)
    for index, entry in enumerate(tree["servers"]):
        _add_entry(doc, ("servers", index), entry, name=None, foreign=True)
    return doc


def _add_entry(doc: Document, origin: tuple[PathPart, ...], entry: Any, *, name: str | None, foreign: bool) -> None:
    if not isinstance(entry, dict):
        doc.problem(origin, f"expected a server entry (a mapping), found {type(entry).__name__}")
        return
    data = dict(entry)
    if name is not None:
        data.setdefault("name", name)
    if foreign:
        data = _from_foreign(doc, origin, data)
    elif "type" not in data:
        data["type"] = _infer_type(data)
    doc.servers.append(RawServer(origin, data))


def _from_foreign(doc: Document, origin: tuple[PathPart, ...], entry: JSONObject) -> JSONObject:
    data: JSONObject = {}
    for key, value in entry.items():
        if key in _FOREIGN_KEYS or key == "name":
            data[key] = value
        elif key == "disabled":
            data["enabled"] = not value
        elif key == "transport" and isinstance(value, str):
            data["type"] = value
        elif key not in _QUIET_KEYS:
            doc.warn((*origin, key), "key not used by mcpmux, ignored")
    data["type"] = _foreign_type(data)
    if isinstance(data.get("name"), str):
        data["name"] = _safe_name(doc, origin, data["name"])
    return data


def _foreign_type(data: JSONObject) -> str:
    declared = str(data.get("type") or "").lower()
    aliases = {
        "streamable-http": "http",
        "streamablehttp": "http",
        "streamable_http": "http",
        "ws": "websocket",
    }
    return aliases.get(declared, declared) or _infer_type(data)


def _infer_type(data: JSONObject) -> str:
    if "command" in data:
        return "stdio"
    url = str(data.get("url") or "")
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("ws", "wss"):
        return "websocket"
    if scheme == "tcp":
        return "tcp"
    if url:
        return "sse" if url.rstrip("/").endswith("/sse") else "http"
    return "stdio"


def _safe_name(doc: Document, origin: tuple[PathPart, ...], name: str) -> str:
    """Map another host's free-form server name onto ``[a-z0-9][a-z0-9_-]{0,31}``."""
    safe = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:32] or "server"
    if not safe[0].isalnum():
        safe = "s" + safe[:31]
    if safe != name:
        doc.warn(origin, f"server name {name!r} is used as {safe!r} (names are [a-z0-9][a-z0-9_-]{{0,31}})")
    return safe
