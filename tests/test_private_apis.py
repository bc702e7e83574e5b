"""Every private name of a dependency that mcpmux uses still exists, with the parameters we pass.

The names are listed once, in the module of :mod:`mcpmux._private` that uses them
(``PRIVATE_NAMES``, ``CALLED_BY``). A dependency release that renames, removes or re-signs one fails
here with the dependency's version and the symbol, instead of somewhere in the gateway.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.metadata
import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import anyio
import pytest
import uvicorn
from mcp.client.auth import OAuthClientProvider
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send
from uvicorn.server import ServerState


def _load(module: str, dist: str) -> ModuleType:
    """A shim of :mod:`mcpmux._private`; one that cannot import says which release broke it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        version = importlib.metadata.version(dist)
        raise ImportError(f"{dist} {version}: {module} cannot import a name it uses ({exc})") from exc


mcp_sdk = _load("mcpmux._private.mcp_sdk", "mcp")
uvicorn_private = _load("mcpmux._private.uvicorn", "uvicorn")
anyio_private = _load("mcpmux._private.anyio", "anyio")
HttpToolsProtocol = uvicorn_private.HttpToolsProtocol

from mcpmux.gateway.responses import DeferredTransport  # noqa: E402 - after the shims' own check
from mcpmux.servers._sdk import new_server  # noqa: E402
from mcpmux.web.slowloris import HeadLimitProtocol  # noqa: E402

SHIMS: list[ModuleType] = [mcp_sdk, uvicorn_private, anyio_private]
NAMES = [(shim, name) for shim in SHIMS for name in shim.PRIVATE_NAMES]
HOOKS = [(shim, name) for shim in SHIMS for name in shim.CALLED_BY]


def where(shim: ModuleType, name: str) -> str:
    dist = shim.DISTRIBUTION
    return f"{dist} {importlib.metadata.version(dist)}: {name} (used by {shim.__name__})"


def resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def parameters(fn: Callable[..., Any]) -> str:
    """``fn``'s parameters as ``PRIVATE_NAMES`` writes them: names, ``*`` before keyword-only ones."""
    rendered: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind is param.KEYWORD_ONLY and "*" not in rendered and not any(p.startswith("*") for p in rendered):
            rendered.append("*")
        prefix = {param.VAR_POSITIONAL: "*", param.VAR_KEYWORD: "**"}.get(param.kind, "")
        rendered.append(prefix + param.name)
    return ", ".join(rendered)


class _Socket(asyncio.Transport):
    """Just enough of a socket transport for uvicorn's protocol to serve one request."""

    def __init__(self) -> None:
        super().__init__()
        self.written, self.closing = b"", False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        pass


async def serving_protocol() -> Any:
    """uvicorn's httptools protocol right after serving one request (as uvicorn builds it)."""
    answered = anyio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})
        answered.set()

    config = uvicorn.Config(app, http="httptools", lifespan="off", log_level="warning")
    config.load()
    protocol = HttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
    protocol.connection_made(_Socket())
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: probe\r\n\r\n")
    with anyio.fail_after(30):
        await answered.wait()
    protocol.connection_lost(None)
    return protocol


async def child_stdin() -> Any:
    """anyio's stream of a child's stdin (asyncio backend), after the child has exited."""
    async with await anyio.open_process([sys.executable, "-c", "pass"]) as process:
        await process.wait()
        return process.stdin


async def instance(cls_path: str) -> Any:
    """An instance of the class ``cls_path`` names, made as mcpmux makes it."""
    if cls_path == "mcp.server.mcpserver.MCPServer":
        return new_server("probe", "a probe")
    if cls_path.endswith("StreamableHTTPServerTransport"):
        return StreamableHTTPServerTransport(mcp_session_id=None)
    if cls_path == "mcp.server.session.ServerSession":
        # Made as the SDK's runner makes one; neither channel is used by reading the attribute.
        return ServerSession(cast(Any, None), Connection(cast(Any, None), protocol_version="2025-11-25"))
    if cls_path.endswith("StreamableHTTPSessionManager"):
        return StreamableHTTPSessionManager(Server("probe"))
    if cls_path.endswith("HttpToolsProtocol"):
        return await serving_protocol()
    if cls_path.endswith("RequestResponseCycle"):
        return (await serving_protocol()).cycle
    if cls_path.endswith("StreamWriterWrapper"):
        return await child_stdin()
    raise AssertionError(f"no instance factory for {cls_path}: add one here")


@pytest.mark.anyio
@pytest.mark.parametrize(("shim", "name"), NAMES, ids=[name for _, name in NAMES])
async def test_every_private_name_we_use_still_exists_with_the_parameters_we_pass(shim: ModuleType, name: str) -> None:
    expected = shim.PRIVATE_NAMES[name]
    if "#" in name:
        cls_path, attr = name.split("#")
        obj = await instance(cls_path)
        assert hasattr(obj, attr), f"{where(shim, name)}: an instance has no attribute {attr!r} any more"
        return
    try:
        target = resolve(name)
    except (ImportError, AttributeError) as exc:
        pytest.fail(f"{where(shim, name)}: gone ({exc})")
    if expected is not None:
        found = parameters(target)
        assert found == expected, f"{where(shim, name)}: parameters are ({found}), mcpmux passes ({expected})"


@pytest.mark.parametrize(("shim", "name"), HOOKS, ids=[name for _, name in HOOKS])
def test_every_private_method_we_override_is_still_called_by_the_dependency(shim: ModuleType, name: str) -> None:
    caller = shim.CALLED_BY[name]
    method = name.rsplit(".", 1)[1]
    source = inspect.getsource(resolve(caller))
    assert f"self.{method}(" in source, f"{where(shim, name)}: {caller} no longer calls it; our override is dead"


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (DeferredTransport, StreamableHTTPServerTransport),
        (mcp_sdk.SessionManager, StreamableHTTPSessionManager),
        (mcp_sdk.GrantProvider, OAuthClientProvider),
        (HeadLimitProtocol, HttpToolsProtocol),
        (uvicorn_private.QuietServer, uvicorn.Server),
    ],
)
def test_our_subclasses_shadow_no_name_of_their_dependency_base_but_the_listed_overrides(
    ours: type, theirs: type
) -> None:
    # A release adding a member under a name we also use would be overridden without a warning.
    # ``_abc_impl`` is the bookkeeping abc puts on every subclass of an abstract class, not a member.
    own = {n for cls in ours.__mro__ if cls.__module__.startswith("mcpmux") for n in vars(cls) if n[:2] != "__"}
    added = own - {"_abc_impl"}
    intended = {name.rsplit(".", 1)[1] for shim in SHIMS for name in shim.PRIVATE_NAMES if "#" not in name}
    shadowed = (added & set(dir(theirs))) - intended
    assert not shadowed, f"{ours.__name__} shadows {sorted(shadowed)} of {theirs.__module__}.{theirs.__name__}"


def test_each_shim_imports_no_other_and_the_package_imports_none() -> None:
    code = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print(sorted(m for m in sys.modules if m.startswith('mcpmux._private.')))"
    )
    for shim in [None, *SHIMS]:
        target = "mcpmux._private" if shim is None else shim.__name__
        run = subprocess.run([sys.executable, "-c", code, target], capture_output=True, text=True, check=True)
        expected = [] if shim is None else [target]
        assert run.stdout.strip() == repr(expected), f"importing {target} loaded {run.stdout.strip()}"


SRC = Path(__file__).resolve().parents[1] / "src" / "mcpmux"
# Underscored names the standard library documents as public.
STDLIB_PUBLIC = {"_exit", "_asdict", "_replace", "_fields", "_make"}
# CPython's C modules under public ones, imported by a file that runs outside the package
# (``python -I -S``, so it cannot import mcpmux._private): the reaper starts for every stdio server,
# and the Python layers of ``signal`` and ``ctypes`` would double its start. Each name it uses is
# checked against the public module in tests/processes/test_reaper.py.
STANDALONE_C_MODULES = {"processes/_reaper.py": {"_signal", "_ctypes"}}


def _ours(trees: dict[Path, ast.Module]) -> set[str]:
    """Every underscored name mcpmux itself defines (functions, classes, attributes, parameters)."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
    return names


def _foreign_private(attr: str, ours: set[str]) -> bool:
    return attr.startswith("_") and not attr.startswith("__") and attr not in ours | STDLIB_PUBLIC


def _foreign_private_uses(path: Path, tree: ast.Module, ours: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] != "mcpmux" and any(p.startswith("_") and p != "__future__" for p in parts):
                found.append(f"{path}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if alias.name in STANDALONE_C_MODULES.get(str(path), ()):
                    continue
                if parts[0] != "mcpmux" and any(p.startswith("_") for p in parts):
                    found.append(f"{path}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and _foreign_private(node.attr, ours):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.slow
def test_no_private_name_of_a_dependency_is_used_outside_mcpmux_private() -> None:
    trees = {path: ast.parse(path.read_text(), str(path)) for path in sorted(SRC.rglob("*.py"))}
    ours = _ours({p: t for p, t in trees.items() if "_private" not in p.parts})
    outside = [p for p in trees if "_private" not in p.parts]
    found = [use for path in outside for use in _foreign_private_uses(path.relative_to(SRC), trees[path], ours)]
    assert not found, "private names of dependencies outside mcpmux._private (move them there):\n" + "\n".join(found)


@pytest.mark.anyio
async def test_the_asyncio_writer_under_a_childs_stdin_is_found() -> None:
    # Without it the direct path still works, through anyio's send (a turn of the loop per write).
    stdin = await child_stdin()
    assert isinstance(anyio_private.asyncio_writer(stdin), asyncio.StreamWriter)
    send, receive = anyio.create_memory_object_stream[bytes](1)
    with send, receive:
        assert anyio_private.asyncio_writer(send) is None
