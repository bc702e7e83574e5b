"""The REST API (FastAPI): sources, their tools, execution under policy, servers and audit.

Routes live under ``/api``; the document of the API itself is ``/api/openapi.json`` and its docs
``/api/docs``. Reads need the scope ``read``, ``POST /api/tools/execute`` needs ``execute``, changes
to sources need ``admin``. A request without a token is let in only where no token is required (a
loopback bind with no token made), and then may do everything, like the person at the machine.
"""

# No ``from __future__ import annotations`` here: FastAPI reads the route functions' annotations at
# run time, and the ``Annotated`` dependency aliases are locals of create_app.
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.routing import APIRouter

from mcpmux.api.admission import refuse_environment_change, refuse_for_network, refuse_processes
from mcpmux.api.models import (
    ExecuteRequest,
    ExecuteResult,
    Problem,
    ServerState,
    SourceCreate,
    SourceOut,
    SourcePatch,
    SyncResult,
    ToolOut,
)
from mcpmux.api.runtime import ApiRuntime
from mcpmux.errors import MCPMuxError, NotFound
from mcpmux.policy.callers import Caller as GroupedCaller
from mcpmux.sources.models import ExecutionMode, Source, SourceSpec, SourceTool
from mcpmux.web.oauth_resource import API_SCOPE_PREFIX, ExternalTokenInfo
from mcpmux.web.problems import ApiProblem, install
from mcpmux.web.security import CALLER, Gatekeeper
from mcpmux.web.tokens import TokenInfo, grants
from mcpmux.web.withheld import for_readers

__all__ = ["API_PREFIX", "Caller", "create_app", "register_source"]

API_PREFIX = "/api"
ServerAction = Literal["enable", "disable", "restart", "refresh"]
_PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": text}
    for status, text in (
        (400, "Bad request"), (401, "No valid token"), (403, "Forbidden (scope, policy)"), (404, "Not found"),
        (409, "Conflict"), (422, "Invalid input"), (502, "Upstream failed"), (503, "Server unavailable"),
    )
}  # fmt: skip


class Caller:
    """Who calls: a token's name and scopes, or the local user (no token required)."""

    def __init__(self, name: str | None, scopes: tuple[str, ...], groups: tuple[str, ...] = ()) -> None:
        self.name, self.scopes, self.groups = name, scopes, groups

    @property
    def audit_name(self) -> str:
        """How the audit log names the caller (``token:NAME``, or ``local``); an OAuth caller's groups
        ride along (:class:`~mcpmux.policy.callers.Caller`), so policy rules can match them."""
        if not self.name:
            return "local"
        return GroupedCaller(f"token:{self.name}", self.groups) if self.groups else f"token:{self.name}"


_T = TypeVar("_T")


def create_app(runtime_of: Callable[[], ApiRuntime], gate: Gatekeeper, *, lifespan: Any = None) -> FastAPI:
    """The API app over the runtime that ``runtime_of`` returns (set once the app's lifespan started).

    Args:
        runtime_of: returns the running :class:`ApiRuntime`.
        gate: the token checks (the gateway's tokens and rules).
        lifespan: the app's lifespan (starts the runtime), or ``None`` when the caller runs it.
    """
    app = FastAPI(
        title="mcpmux",
        summary="Sources (MCP servers and OpenAPI services), their tools, and execution under policy.",
        version="1",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=None,  # served below, with Swagger UI's files from the package (no CDN)
        redoc_url=None,
        lifespan=lifespan,
    )
    install(app)
    _offline_docs(app)

    def caller(request: Request) -> Caller:
        # The security middleware checked the token (and took the header off): it left who it was.
        info = request.scope.get(CALLER)
        if isinstance(info, TokenInfo):
            return Caller(info.name, info.api_scopes, info.groups if isinstance(info, ExternalTokenInfo) else ())
        if gate.tokens_required():
            raise ApiProblem(401, "Unauthorized", "a valid bearer token is required (mcpmux token create NAME)")
        return Caller(None, ("read", "execute", "admin"))

    def needs(scope: str) -> Callable[[Caller], Caller]:
        def check(who: Annotated[Caller, Depends(caller)]) -> Caller:
            if not grants(who.scopes, scope):
                if who.name is not None and who.name.startswith("oauth:"):
                    how = f"an access token with the scope {API_SCOPE_PREFIX}{scope}"
                else:
                    how = f"mcpmux token create NAME --scope {scope}"
                detail = f"token {who.name!r} lacks the scope {scope!r} ({how})"
                raise ApiProblem(403, "Forbidden", detail)
            return who

        return check

    reader = Annotated[Caller, Depends(needs("read"))]
    executor = Annotated[Caller, Depends(needs("execute"))]
    admin = Annotated[Caller, Depends(needs("admin"))]
    router = APIRouter(prefix=API_PREFIX, responses=_PROBLEMS)

    @router.get("/sources", response_model=list[SourceOut])
    async def list_sources(who: reader) -> list[dict[str, Any]]:
        """Every source: registered ones, and the configuration's servers (read-only)."""
        rt = runtime_of()
        registered = await rt.registry_call(rt.registry.all)
        return [s.to_json() for s in registered] + [_configured(rt, name) for name in rt.configured()]

    @router.post("/sources", response_model=SourceOut, status_code=201)
    async def create_source(body: SourceCreate, who: admin) -> dict[str, Any]:
        """Register a source; nothing is stored unless all of it is valid."""
        source = await register_source(runtime_of(), body, network_caller=who.name is not None)
        return source.to_json()

    @router.get("/sources/{source_id}", response_model=SourceOut)
    async def get_source(source_id: str, who: reader) -> dict[str, Any]:
        """One source by id or name."""
        rt = runtime_of()
        if source_id in rt.configured():
            return _configured(rt, source_id)
        source = await rt.registry_call(rt.registry.get, source_id)
        return source.to_json()

    @router.patch("/sources/{source_id}", response_model=SourceOut)
    async def patch_source(source_id: str, body: SourcePatch, who: admin) -> dict[str, Any]:
        """Change a registered source's description, lifecycle or variable values."""
        rt = runtime_of()
        _writable(rt, source_id)
        changes: dict[str, Any] = {}
        if body.description is not None:
            changes["description"] = body.description
        if body.lifecycle_mode is not None:
            changes["lifecycle"] = body.lifecycle_mode
        if body.environment is not None:
            if who.name is not None:  # a network caller (see mcpmux.api.admission)
                current = await rt.registry_call(rt.registry.get, source_id)
                await refuse_environment_change(rt, current, body.environment)
            changes["environment"] = body.environment
        source = await rt.registry_call(rt.registry.update, source_id, changes)
        await rt.joined(source)
        return source.to_json()

    @router.delete("/sources/{source_id}", status_code=204)
    async def delete_source(source_id: str, who: admin) -> Response:
        """Unregister a source (its secrets and tools go with it)."""
        rt = runtime_of()
        _writable(rt, source_id)
        removed = await rt.registry_call(rt.registry.remove, source_id)
        await rt.left(removed.name)
        return Response(status_code=204)

    @router.post("/sources/{source_id}/sync", response_model=SyncResult)
    async def sync(source_id: str, who: admin) -> dict[str, Any]:
        """Connect the source, store the tools it lists and return them."""
        rt = runtime_of()
        _writable(rt, source_id)
        tools = await rt.sync(source_id)
        return {"tools_discovered": len(tools), "tools": [t.to_json() for t in tools]}

    @router.get("/tools", response_model=list[ToolOut])
    async def list_tools(
        who: reader,
        source: Annotated[str | None, Query(max_length=64)] = None,
        q: Annotated[str | None, Query(max_length=200, description="text in the name or description")] = None,
    ) -> list[dict[str, Any]]:
        """Tools of the registered sources (as last synced) and of the configuration's servers (live)."""
        rt = runtime_of()
        stored = await rt.registry_call(lambda: rt.registry.tools(source=source, search=q))
        return [t.to_json() for t in stored] + [t.to_json() for t in _live_tools(rt, source, q)]

    @router.get("/tools/{tool_id}", response_model=ToolOut)
    async def get_tool(tool_id: str, who: reader) -> dict[str, Any]:
        """One tool by ``SOURCE:TOOL``."""
        rt = runtime_of()
        source, _, name = tool_id.partition(":")
        found = await rt.registry_call(lambda: rt.registry.tools(source=source)) if source else []
        found += _live_tools(rt, source, None)
        for tool in found:
            if tool.name == name:
                return tool.to_json()
        raise NotFound("tool", tool_id, [t.tool_id for t in found][:3])

    @router.post("/tools/execute", response_model=ExecuteResult)
    async def execute(body: ExecuteRequest, who: executor, request: Request) -> Any:
        """Call a tool through the guard (allow/deny, pins, approval, audit naming the token).

        A caller that disconnects while its call waits (for a person's approval, or the tool) withdraws
        it: the wait ends, a held approval leaves the queue (it cannot be approved for nobody later).
        """
        rt = runtime_of()
        result = await _unless_gone(request, rt.guard.call_tool(body.tool_id, body.arguments, caller=who.audit_name))
        if result is None:
            return Response(status_code=499)  # "client closed request": nobody reads it
        content = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]
        return {
            "success": not result.is_error,
            "is_error": bool(result.is_error),
            "content": content,
            "structured_content": result.structured_content,
        }

    @router.get("/servers", response_model=list[ServerState])
    async def servers(who: reader) -> list[dict[str, Any]]:
        """Every server's state and the reason for it (an upstream's answer body only for the admin scope)."""
        shown = (lambda s: s) if grants(who.scopes, "admin") else for_readers
        return [_server_state(shown(s)) for s in runtime_of().guard.status()]

    @router.post("/servers/{name}/{action}", response_model=ServerState)
    async def server_action(name: str, action: ServerAction, who: admin) -> dict[str, Any]:
        """Enable or disable a server at run time (the configuration file is not changed; a restart of
        the API starts what the configuration enables), or restart or refresh it. Returns its state."""
        guard = runtime_of().guard
        verbs = {"enable": guard.enable, "disable": guard.disable, "restart": guard.restart, "refresh": guard.refresh}
        await verbs[action](name, caller=who.audit_name)
        return next(_server_state(s) for s in guard.status() if s.name == name)

    @router.get("/audit")
    async def audit(
        who: reader,
        since_s: Annotated[float | None, Query(ge=0, le=10**9, description="only the last N seconds")] = None,
        server: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    ) -> list[dict[str, Any]]:
        """Audit rows, newest first."""
        rt = runtime_of()
        since = time.time() - since_s if since_s is not None else None
        rows = await rt.registry_call(lambda: rt.guard.audit.query(since=since, server=server, limit=limit))
        return [r.to_json() for r in rows]

    app.include_router(router)
    return app


DOCS_ASSETS = f"{API_PREFIX}/docs/assets"


def _offline_docs(app: FastAPI) -> None:
    """``/api/docs``: Swagger UI with its script, styles and icon from the ``swagger-ui-bundle`` package.

    Nothing is loaded from a CDN: the docs work offline, and the page (on the console's origin when
    both are served) runs no third-party script.
    """
    from fastapi.openapi.docs import get_swagger_ui_html
    from starlette.staticfiles import StaticFiles
    from swagger_ui_bundle import swagger_ui_path

    app.mount(DOCS_ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get(f"{API_PREFIX}/docs", include_in_schema=False)
    async def docs() -> Response:
        return get_swagger_ui_html(
            openapi_url=f"{API_PREFIX}/openapi.json", title="mcpmux API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
        )  # fmt: skip


async def _unless_gone(request: Request, call: Awaitable[_T]) -> _T | None:
    """``call``'s result, or ``None`` once the HTTP client has disconnected (``call`` is then cancelled).

    An error of ``call`` is raised as it is (not wrapped in the task group's exception group).
    """
    outcome: list[_T] = []
    failure: Exception | None = None
    gone = anyio.CancelScope()

    async def watch() -> None:
        # The body is read: the next message the server gives is the client's disconnect.
        while (await request.receive())["type"] != "http.disconnect":
            pass
        gone.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        with gone:
            try:
                outcome.append(await call)
            except Exception as exc:  # noqa: BLE001 - raised below as it is, outside the task group
                failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return outcome[0] if outcome else None


def _server_state(status: Any) -> dict[str, Any]:
    return {
        "name": status.name, "type": status.type, "state": str(status.state), "reason": status.reason,
        "tools": status.tools, "restarts": status.restarts,
    }  # fmt: skip


async def register_source(rt: ApiRuntime, body: SourceCreate, *, network_caller: bool) -> Source:
    """Register a source and make it live, as ``POST /api/sources`` does (the console's "add source" too).

    ``network_caller``: a caller known by a token, held to :mod:`mcpmux.api.admission`'s rules.

    Raises:
        ApiProblem: the source would start a process, points at a private address, or is no OpenAPI document.
        MCPMuxError: the registry refused it (name taken, invalid), or it could not join the manager.
    """
    spec = _spec(body)
    refuse_processes(rt, spec)
    if network_caller:
        await refuse_for_network(spec)
    if spec.source_type == "openapi":
        await _check_openapi(spec)
    source = await rt.registry_call(lambda: rt.registry.add(spec, reserved=rt.configured()))
    try:
        await rt.joined(source)
    except MCPMuxError:
        await rt.registry_call(rt.registry.remove, source.id)
        raise
    return source


def _spec(body: SourceCreate) -> SourceSpec:
    mcp = body.mcp_config
    config: dict[str, Any] = {}
    environment = dict(body.environment)
    lifecycle = "singleton"
    manifest = None
    if body.source_type == "openapi":
        config = dict(body.openapi_config or {})
    elif mcp is not None:
        extra = dict(mcp.model_extra or {})
        config, manifest, lifecycle = extra, mcp.manifest, mcp.lifecycle_mode
        environment.update(mcp.environment)
    return SourceSpec(
        name=body.name, source_type=body.source_type, description=body.description, url=body.url,
        manifest=manifest, config=config, environment=environment,
        lifecycle="transient" if lifecycle == "transient" else "singleton",
    )  # fmt: skip


async def _check_openapi(spec: SourceSpec) -> None:
    """Read and convert the document before anything is stored (a bad one is a 422)."""
    from mcpmux.servers.openapi import load_spec, operations_of, target_of
    from mcpmux.sources.entries import materialise, prepare

    prepared = prepare(spec)
    server = materialise(spec.name, prepared.entry, {**prepared.plain, **prepared.secrets}, spec.lifecycle)
    from mcpmux.config.models import OpenAPIServerConfig

    assert isinstance(server, OpenAPIServerConfig)
    document = await load_spec(server.spec, verify_tls=server.verify_tls)
    operations_of(server, document)
    await _check_reachable(target_of(server, document).base_url)


REACH_TIMEOUT_S = 10.0


async def _check_reachable(base_url: str) -> None:
    """The service behind ``base_url`` accepts a connection (any HTTP answer would do): a source
    whose every call would fail is not registered. Nothing is sent."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        with anyio.fail_after(REACH_TIMEOUT_S):
            stream = await anyio.connect_tcp(host, port)
    except TimeoutError:
        why = f"no answer within {REACH_TIMEOUT_S:g} s"
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
    else:
        await stream.aclose()
        return
    detail = f"the service's base URL {base_url} is unreachable ({why}); start it or correct base_url, then retry"
    raise ApiProblem(422, "Unreachable", detail)


def _writable(rt: ApiRuntime, key: str) -> None:
    if key in rt.configured():
        raise ApiProblem(409, "Read-only source", f"{key!r} comes from a configuration file; edit that file")


def _configured(rt: ApiRuntime, name: str) -> dict[str, Any]:
    server = next(s for s in rt.config.servers if s.name == name)
    status = {s.name: s for s in rt.host.status()}.get(name)
    return {
        "id": name, "name": name, "description": server.description or "",
        "source_type": "openapi" if server.type == "openapi" else "mcp", "url": getattr(server, "url", None),
        "lifecycle_mode": server.lifecycle, "config": {"type": server.type},
        "variables": [], "environment": {}, "read_only": True, "origin": "config",
        "created_at": None, "updated_at": None, "synced_at": None,
        "state": str(status.state) if status else None,
    }  # fmt: skip


def _live_tools(rt: ApiRuntime, source: str | None, search: str | None) -> list[SourceTool]:
    configured = set(rt.configured())
    out = []
    for tool in rt.guard.tools():
        if tool.server not in configured or (source is not None and tool.server != source) or tool.synthetic:
            continue
        if search and search.lower() not in (tool.tool + " " + tool.description).lower():
            continue
        server = next(s for s in rt.config.servers if s.name == tool.server)
        mode: ExecutionMode = "sync_http" if server.type == "openapi" else "mcp_call"
        out.append(
            SourceTool(tool.server, tool.server, tool.tool, tool.description, tool.input_schema, tool.annotations, mode)
        )
    return out
