"""The field suite's catalogue: real MCP servers nobody here wrote, how to run each, and a harmless call.

Every server is installed by ``scripts/install-peers`` (npm packages in ``tests/peers/node_modules``,
PyPI servers in one venv per SDK generation) and run from its installed entry point: never through
``npx -y`` or ``uvx``, which would download at test time. Network servers listen on 127.0.0.1 only
(the Node ones through the loopback preload, the Python ones through ``--host``).

A :class:`FieldServer` names the server, its registry package, language, SDK generation and
transport, how to start it from a :class:`Site` (the session's scratch data: a git repository, a
PostgreSQL cluster, a loopback web page), the harmless call every face makes, and the faces that
fail because of a known mcpmux bug (``known``: face -> :class:`KnownBug`, turned into strict xfails).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.peers.fixtures import gunicorn, node22, peers_dir

__all__ = [
    "FACES",
    "FIELD_SERVERS",
    "NEW_RUN_ROOTS",
    "FieldServer",
    "KnownBug",
    "Probe",
    "Site",
    "field_venv_bin",
    "npm_entry",
    "probe_arguments",
    "stale_installs",
]

Face = Literal["test", "tools", "call", "serve", "serve-http", "run", "library"]
FACES: tuple[Face, ...] = ("test", "tools", "call", "serve", "serve-http", "run", "library")


@dataclass(frozen=True)
class KnownBug:
    """A known mcpmux bug: the xfail ``reason``, and a regex its failure ``signature`` must match.

    A face marked with it that fails any other way is a real failure, not an expected one.
    """

    reason: str
    signature: str


# Found by this suite (not in issue 14): the agent loop answers roots/list with the current directory
# only, and server-filesystem (per the roots spec) replaces its configured directories with the roots.
NEW_RUN_ROOTS = KnownBug(
    "field finding: `mcpmux run` advertises only the cwd as root, so server-filesystem loses the "
    "directories its config grants (call/serve reach them, the agent loop gets 'Access denied')",
    r"Access denied - path outside allowed directories",
)


@dataclass(frozen=True)
class Site:
    """What the servers of one session work on (all under the session's temporary directory).

    Attributes:
        data: a directory with ``notes.txt`` and ``field.xlsx`` (``FIELD_MARKER`` in both, the workbook's
            cell Field!A1); filesystem, excel and word read it.
        repo: a git repository with one commit, for mcp-server-git.
        postgres_dsn: a throwaway PostgreSQL cluster on 127.0.0.1 (empty when not started).
        web_url: a page on a loopback HTTP server whose text contains ``FIELD_MARKER``, for mcp-server-fetch.
    """

    data: Path
    repo: Path
    postgres_dsn: str
    web_url: str


@dataclass(frozen=True)
class Probe:
    """The harmless call: a read-only tool, valid arguments, and text its result must contain."""

    tool: str
    arguments: Mapping[str, Any]
    expect: str


# argv(site, work, port): ``work`` is a scratch directory of one face (or of the listener); ``port``
# is the listener's port for an HTTP server, 0 for stdio.
Argv = Callable[[Site, Path, int], list[str]]
Env = Callable[[Site, Path], dict[str, str]]


def _no_env(_site: Site, _work: Path) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class FieldServer:
    """One row of the table.

    Attributes:
        name: the mcpmux server name (and the test id).
        package: the registry package and pinned version it comes from.
        lang: ``node`` or ``python``.
        sdk: the SDK generation the server is built on (``TS 1.x``, ``TS 2.x``, ``Py 1.x``, ``Py 2.x``,
            ``fastmcp 4``).
        transport: ``stdio``, ``http`` (Streamable HTTP: the suite starts the listener itself), or
            ``openapi`` (a REST service with its own OpenAPI document, an mcpmux ``type: openapi`` server:
            the suite starts the service and points ``spec`` at its document).
        argv: the command line (of the stdio server, or of the HTTP listener).
        probe: the harmless call.
        env: extra environment of the server.
        known: face -> :class:`KnownBug`, for faces that fail because of a known mcpmux bug (strict xfail).
    """

    name: str
    package: str
    lang: Literal["node", "python"]
    sdk: str
    transport: Literal["stdio", "http", "openapi"]
    argv: Argv
    probe: Probe
    env: Env = _no_env
    known: Mapping[str, KnownBug] = field(default_factory=dict)

    @property
    def canonical_tool(self) -> str:
        return f"{self.name}:{self.probe.tool}"

    @property
    def provider_tool(self) -> str:
        """The name an LLM or a downstream MCP client sees (``server__tool``)."""
        return f"{self.name}__{self.probe.tool}"


def _stamp_matches(stamp: Path, kind: str, *inputs: Path) -> bool:
    # The key scripts/install-peers writes: a kind word, then sha256 over the concatenated inputs.
    digest = hashlib.sha256(b"".join(path.read_bytes() for path in inputs)).hexdigest()
    try:
        return stamp.read_text().split()[:2] == [kind, digest]
    except FileNotFoundError:
        return False


def stale_installs() -> list[str]:
    """The parts of the field suite's install that are missing or older than their pins (empty: all fine)."""
    root = peers_dir()
    # name -> (stamp, kind, inputs)
    parts: dict[str, tuple[Path, str, tuple[Path, ...]]] = {
        "npm servers (tests/peers/node_modules)": (
            root / "node_modules" / ".install-peers.stamp",
            "npm",
            (root / "package.json", root / "package-lock.json"),
        ),
        "PyPI servers (tests/peers/.venv)": (
            root / ".venv" / ".install-peers.stamp",
            "pip",
            (root / "requirements.txt",),
        ),
    }
    parts["the REST service for OpenAPI sources (tests/peers/.venv-rest)"] = (
        root / ".venv-rest" / ".install-peers.stamp",
        "pip",
        (root / "rest" / "requirements.txt",),
    )
    for generation in (1, 2):
        venv = root / f".venv-field-sdk{generation}"
        requirements = root / "field" / f"requirements-sdk{generation}.txt"
        parts[f"PyPI SDK {generation}.x servers (tests/peers/{venv.name})"] = (
            venv / ".install-peers.stamp",
            "pip",
            (requirements,),
        )
    return [name for name, (stamp, kind, inputs) in parts.items() if not _stamp_matches(stamp, kind, *inputs)]


def npm_entry(relative: str) -> str:
    """An installed npm package's file under ``tests/peers/node_modules``."""
    return str(peers_dir() / "node_modules" / relative)


def field_venv_bin(generation: Literal[1, 2], script: str) -> str:
    """A console script of the field venv for SDK generation 1 or 2 (``tests/peers/.venv-field-sdkN``)."""
    return str(peers_dir() / f".venv-field-sdk{generation}" / "bin" / script)


def _node(relative: str, *args: str) -> Argv:
    return lambda _site, _work, _port: [str(node22()), npm_entry(relative), *args]


_EVERYTHING = "@modelcontextprotocol/server-everything/dist/index.js"
_HELLO = "mcp-hello-world/build/stdio.js"


def _ext_app(name: str, *, http: bool = False) -> Argv:
    # ext-apps examples: Streamable HTTP (stateless) on $PORT at /mcp by default, stdio with --stdio.
    entry = f"@modelcontextprotocol/server-{name}/dist/index.js"
    return _node(entry) if http else _node(entry, "--stdio")


def _memory_env(_site: Site, work: Path) -> dict[str, str]:
    return {"MEMORY_FILE_PATH": str(work / "memory.jsonl")}


def _fetch_env(_site: Site, _work: Path) -> dict[str, str]:
    return {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


_ECHO = Probe("echo", {"message": "field-echo-7"}, "field-echo-7")

FIELD_SERVERS: tuple[FieldServer, ...] = (
    # --- Node, TypeScript SDK 1.x -----------------------------------------------------------------
    FieldServer(
        "everything",
        "npm @modelcontextprotocol/server-everything 2026.8.31",
        "node",
        "TS 1.x",
        "stdio",
        _node(_EVERYTHING, "stdio"),
        _ECHO,
    ),
    FieldServer(
        "everything-http",
        "npm @modelcontextprotocol/server-everything 2026.8.31",
        "node",
        "TS 1.x",
        "http",
        _node(_EVERYTHING, "streamableHttp"),
        _ECHO,
    ),
    FieldServer(
        "filesystem",
        "npm @modelcontextprotocol/server-filesystem 2026.8.31",
        "node",
        "TS 1.x",
        "stdio",
        lambda site, _work, _port: [
            str(node22()),
            npm_entry("@modelcontextprotocol/server-filesystem/dist/index.js"),
            str(site.data),
        ],
        Probe("list_directory", {"path": "DATA_DIR"}, "notes.txt"),
        known={"run": NEW_RUN_ROOTS},
    ),
    FieldServer(
        "memory",
        "npm @modelcontextprotocol/server-memory 2026.8.31",
        "node",
        "TS 1.x",
        "stdio",
        _node("@modelcontextprotocol/server-memory/dist/index.js"),
        Probe("read_graph", {}, "entities"),
        env=_memory_env,
    ),
    FieldServer(
        "seqthink",
        "npm @modelcontextprotocol/server-sequential-thinking 2026.8.31",
        "node",
        "TS 1.x",
        "stdio",
        _node("@modelcontextprotocol/server-sequential-thinking/dist/index.js"),
        Probe(
            "sequentialthinking",
            {"thought": "field check", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1},
            "thoughtHistoryLength",
        ),
    ),
    FieldServer(
        "hello",
        "npm mcp-hello-world 1.1.2",
        "node",
        "TS 1.x",
        "stdio",
        _node(_HELLO),
        _ECHO,
    ),
    FieldServer(
        "postgres",
        "npm @modelcontextprotocol/server-postgres 0.6.2",
        "node",
        "TS 1.x (1.0.1)",
        "stdio",
        lambda site, _work, _port: [
            str(node22()),
            npm_entry("@modelcontextprotocol/server-postgres/dist/index.js"),
            site.postgres_dsn,
        ],
        Probe("query", {"sql": "SELECT 40 + 2 AS field_answer"}, "42"),
    ),
    # --- Node, TypeScript SDK 2.x (the MCP Apps examples and the mcp-proxy bridge) ---------------------
    FieldServer(
        "budget",
        "npm @modelcontextprotocol/server-budget-allocator 2.0.3",
        "node",
        "TS 2.x",
        "stdio",
        _ext_app("budget-allocator"),
        Probe("get-budget-data", {}, "categories"),
    ),
    FieldServer(
        "budget-http",
        "npm @modelcontextprotocol/server-budget-allocator 2.0.3",
        "node",
        "TS 2.x",
        "http",
        _ext_app("budget-allocator", http=True),
        Probe("get-budget-data", {}, "categories"),
    ),
    FieldServer(
        "cohort",
        "npm @modelcontextprotocol/server-cohort-heatmap 2.0.3",
        "node",
        "TS 2.x",
        "stdio",
        _ext_app("cohort-heatmap"),
        Probe("get-cohort-data", {"cohortCount": 3, "maxPeriods": 3}, "cohorts"),
    ),
    FieldServer(
        "segments",
        "npm @modelcontextprotocol/server-customer-segmentation 2.0.3",
        "node",
        "TS 2.x",
        "stdio",
        _ext_app("customer-segmentation"),
        Probe("get-customer-data", {"segment": "SMB"}, "SMB"),
    ),
    FieldServer(
        "scenario",
        "npm @modelcontextprotocol/server-scenario-modeler 2.0.3",
        "node",
        "TS 2.x",
        "stdio",
        _ext_app("scenario-modeler"),
        Probe("get-scenario-data", {}, "MRR"),
    ),
    FieldServer(
        "sysmon",
        "npm @modelcontextprotocol/server-system-monitor 2.0.3",
        "node",
        "TS 2.x",
        "stdio",
        _ext_app("system-monitor"),
        Probe("get-system-info", {}, "cpu"),
    ),
    FieldServer(
        "proxy-ts",
        "npm mcp-proxy 6.7.19 (over mcp-hello-world)",
        "node",
        "TS 2.x",
        "http",
        lambda _site, _work, port: [
            str(node22()),
            npm_entry("mcp-proxy/dist/bin/mcp-proxy.mjs"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--server",
            "stream",
            "--",
            str(node22()),
            npm_entry(_HELLO),
        ],
        _ECHO,
    ),
    # --- Python, SDK 2.x (and fastmcp 4 on it) ---------------------------------------------------
    FieldServer(
        "time",
        "pypi mcp-server-time 2026.10.19",
        "python",
        "Py 2.x",
        "stdio",
        lambda _site, _work, _port: [str(peers_dir() / ".venv" / "bin" / "mcp-server-time"), "--local-timezone", "UTC"],
        Probe("get_current_time", {"timezone": "UTC"}, "UTC"),
    ),
    FieldServer(
        "git",
        "pypi mcp-server-git 2026.10.19",
        "python",
        "Py 2.x",
        "stdio",
        lambda site, _work, _port: [str(peers_dir() / ".venv" / "bin" / "mcp-server-git"), "-r", str(site.repo)],
        Probe("git_log", {"repo_path": "REPO_DIR", "max_count": 1}, "Initial commit"),
    ),
    FieldServer(
        "fetch",
        "pypi mcp-server-fetch 2026.10.24",
        "python",
        "Py 2.x",
        "stdio",
        lambda _site, _work, _port: [field_venv_bin(2, "mcp-server-fetch"), "--allow-private-ips"],
        Probe("fetch", {"url": "WEB_URL"}, "field-marker-31"),
        env=_fetch_env,
    ),
    FieldServer(
        "excel",
        "pypi excel-mcp-server 2.2.2",
        "python",
        "Py 2.x",
        "stdio",
        lambda site, _work, _port: [field_venv_bin(2, "excel-mcp-server"), "stdio", "--allow-dir", str(site.data)],
        Probe("read_range", {"path": "field.xlsx", "sheet": "Field", "range": "A1"}, "field-marker-31"),
    ),
    FieldServer(
        "excel-http",
        "pypi excel-mcp-server 2.2.2",
        "python",
        "Py 2.x",
        "http",
        lambda site, _work, port: [
            field_venv_bin(2, "excel-mcp-server"),
            "streamable-http",
            "--allow-dir",
            str(site.data),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        Probe("read_range", {"path": "field.xlsx", "sheet": "Field", "range": "A1"}, "field-marker-31"),
    ),
    FieldServer(
        "word",
        "pypi office-word-mcp-server 1.1.11",
        "python",
        "fastmcp 4",
        "stdio",
        lambda _site, _work, _port: [field_venv_bin(2, "word_mcp_server")],
        Probe("list_available_documents", {"directory": "DATA_DIR"}, "No Word documents"),
    ),
    # --- Python, SDK 1.x -------------------------------------------------------------------------
    FieldServer(
        "sqlite",
        "pypi mcp-server-sqlite 2025.4.25",
        "python",
        "Py 1.x",
        "stdio",
        lambda _site, work, _port: [field_venv_bin(1, "mcp-server-sqlite"), "--db-path", str(work / "field.db")],
        Probe("read_query", {"query": "SELECT 40 + 2 AS field_answer"}, "42"),
    ),
    FieldServer(
        "duckdb",
        "pypi mcp-server-duckdb 1.1.0",
        "python",
        "Py 1.x",
        "stdio",
        lambda _site, work, _port: [field_venv_bin(1, "mcp-server-duckdb"), "--db-path", str(work / "field.duckdb")],
        Probe("query", {"query": "SELECT 40 + 2 AS field_answer"}, "42"),
    ),
    FieldServer(
        "proxy-py",
        "pypi mcp-proxy 0.13.0 (over mcp-server-duckdb)",
        "python",
        "Py 1.x",
        "http",
        lambda _site, work, port: [
            field_venv_bin(1, "mcp-proxy"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            field_venv_bin(1, "mcp-server-duckdb"),
            "--",
            "--db-path",
            str(work / "proxied.duckdb"),
        ],
        Probe("query", {"query": "SELECT 40 + 2 AS field_answer"}, "42"),
    ),
    # --- A REST service, not an MCP server: an OpenAPI source (Swagger 2.0) ------------------------
    FieldServer(
        "httpbin",
        "pypi httpbin 0.10.4 (its own Swagger 2.0 document, /spec.json)",
        "python",
        "OpenAPI (Swagger 2.0)",
        "openapi",
        lambda _site, _work, port: [
            str(gunicorn()),
            "--no-control-socket",
            "-b",
            f"127.0.0.1:{port}",
            "-k",
            "gthread",
            "--threads",
            "4",
            "httpbin:app",
        ],
        Probe("get_base64_value", {"value": "ZmllbGQtbWFya2VyLTMx"}, "field-marker-31"),
    ),
)


def probe_arguments(server: FieldServer, site: Site) -> dict[str, Any]:
    """The probe's arguments with the site's placeholders (``WEB_URL``, ``DATA_DIR``) filled in."""
    fill = {"WEB_URL": site.web_url, "DATA_DIR": str(site.data), "REPO_DIR": str(site.repo)}
    return {key: fill.get(v, v) if isinstance(v, str) else v for key, v in server.probe.arguments.items()}
