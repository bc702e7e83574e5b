"""The console's pages and actions: servers, tools, resources, prompts, approvals, audit, sign-in.

Each handler is thin: it reads the host through its guard (face ``console``), renders a template,
or performs one guarded verb and redirects back (POST, then GET).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import anyio.to_thread
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from mcpmux.api.app import register_source
from mcpmux.api.models import SourceCreate
from mcpmux.bridge.tool_search import ToolIndex
from mcpmux.bridge.tools import ToolBridge
from mcpmux.console.context import PREFIX, ConsoleContext, form_of, page, set_session_cookie
from mcpmux.console.forms import RAW_FIELD, arguments_from, fields_of
from mcpmux.console.render import blocks_of
from mcpmux.console.sessions import COOKIE, Session, same_origin
from mcpmux.errors import MCPMuxError, NotFound, UsageError
from mcpmux.policy import Answer
from mcpmux.policy.audit import AuditRow
from mcpmux.policy.scanner import scan_tool
from mcpmux.processes.usage import process_usage
from mcpmux.types import ServerState
from mcpmux.web.problems import ApiProblem
from mcpmux.web.withheld import for_readers

__all__ = ["ROUTES"]

PAGE_SIZE = 50
EXPORT_LIMIT = 10_000
SEARCH_LIMIT = 50
STATS_ROWS = 100
MEASURE_TTL_S = 5.0
MEASURE_LIMIT = 1000
_T = TypeVar("_T")
ANSWERS = {"yes": Answer.YES, "always-tool": Answer.ALWAYS_TOOL, "no": Answer.NO}


def _back(path: str) -> RedirectResponse:
    return RedirectResponse(f"{PREFIX}{path}", status_code=303)


def _caller(session: Session) -> str:
    return f"console:{session.who}"


# -- sign-in -----------------------------------------------------------------------------------


async def login_page(ctx: ConsoleContext, request: Request) -> Response:
    error = request.query_params.get("error")
    return ctx.render(request, None, "login.html", 401 if error else 200,
                      tokens=ctx.sessions.tokens_in_use(), error=error, title="Sign in")  # fmt: skip


async def login(ctx: ConsoleContext, request: Request) -> Response:
    headers = request.headers
    if not same_origin(headers.get("host", ""), request.url.scheme, headers.get("origin"), headers.get("referer")):
        return PlainTextResponse("Cross-origin request refused", status_code=403)
    session = ctx.sessions.sign_in((await form_of(request)).get("secret", ""))
    if session is None:
        return _back("/login?error=1")
    response = _back("/servers")
    set_session_cookie(response, request, session)
    return response


@page("read")
async def logout(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    ctx.sessions.sign_out(session.id)
    response = _back("/login")
    response.delete_cookie(COOKIE, path=PREFIX)
    return response


async def home(ctx: ConsoleContext, request: Request) -> Response:
    return _back("/servers")


# -- servers -----------------------------------------------------------------------------------


def _stats(ctx: ConsoleContext, server: str) -> dict[str, Any]:
    rows = ctx.guard.audit.query(server=server, limit=STATS_ROWS)
    calls = [r for r in rows if r.outcome != "refused"]
    timed = [r.duration_ms for r in calls if r.duration_ms is not None]
    errors = sum(1 for r in calls if r.outcome in ("error", "tool-error"))
    return {
        "calls": len(calls),
        "latency_ms": (sum(timed) / len(timed)) if timed else None,
        "error_rate": (errors / len(calls)) if calls else None,
    }


def _measure(ctx: ConsoleContext, status: Any) -> dict[str, Any]:
    """Usage (a walk of every process on the machine) and call stats, kept for :data:`MEASURE_TTL_S`.

    A page that re-renders on every event must not cost the gateway what its calls need.
    """
    key, now = (status.name, status.pid), time.monotonic()
    kept = ctx.measured.get(key)
    if kept is not None and now - kept[0] < MEASURE_TTL_S:
        return kept[1]
    usage = process_usage(status.pid)
    measured = {"usage": usage.to_json() if usage else None, **_stats(ctx, status.name)}
    if len(ctx.measured) > MEASURE_LIMIT:
        ctx.measured.clear()
    ctx.measured[key] = (now, measured)
    return measured


def _server_view(ctx: ConsoleContext, status: Any) -> dict[str, Any]:
    config = ctx.guard.config.server(status.name)
    return {
        "status": status, "max_rss_mb": getattr(config, "max_rss_mb", None),
        "enabled": status.state is not ServerState.DISABLED, "in_config": config.enabled,
        **_measure(ctx, status),
    }  # fmt: skip


def _shown(session: Session, status: Any) -> Any:
    """A server's status as this viewer may see it: an upstream's answer body only with the admin scope."""
    return status if session.can("admin") else for_readers(status)


@page("read")
async def servers(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    views = [_server_view(ctx, _shown(session, s)) for s in ctx.guard.status()]
    return ctx.render(request, session, "servers.html", servers=views, title="Servers")


@page("read")
async def server(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    status = next((s for s in ctx.guard.status() if s.name == name), None)
    if status is None:
        raise NotFound("server", name, [])
    view = _server_view(ctx, _shown(session, status))
    tail = ctx.guard.stderr_tail(name)
    return ctx.render(request, session, "server.html", server=view, stderr=tail, title=f"Server {name}")


@page("admin")
async def server_action(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    name, action = request.path_params["name"], request.path_params["action"]
    if name not in ctx.guard.servers:
        raise NotFound("server", name, [])
    guard = ctx.guard
    verbs = {"restart": guard.restart, "refresh": guard.refresh, "enable": guard.enable, "disable": guard.disable}
    verb = verbs.get(action)
    if verb is None:
        raise UsageError(f"unknown action {action!r}", hint="restart, refresh, enable or disable")
    await verb(name, caller=_caller(session))
    return _back(f"/servers/{quote(name)}")


# -- tools -------------------------------------------------------------------------------------


@page("read")
async def tools(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    query = request.query_params.get("q", "").strip()
    exposures = {e.tool.name: e for e in ctx.guard.exposures()}
    shown = sorted(exposures.values(), key=lambda e: e.tool.name)
    if query:
        bridge = ToolBridge(ctx.guard)
        index = ToolIndex(bridge.tools())
        try:
            hits = [t.canonical for t in index.search(query, SEARCH_LIMIT)]
        finally:
            index.close()
        withheld = [e for e in shown if not e.exposed and query.lower() in e.tool.name.lower()]
        shown = [exposures[name] for name in hits if name in exposures] + withheld
    return ctx.render(request, session, "tools.html", tools=shown, query=query, title="Tools")


def _exposure_of(ctx: ConsoleContext, name: str) -> Any:
    exposure = next((e for e in ctx.guard.exposures() if e.tool.name == name), None)
    if exposure is None:
        raise NotFound("tool", name, [])
    return exposure


@page("read")
async def tool(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    return _tool_page(ctx, request, session, request.path_params["name"])


def _tool_page(
    ctx: ConsoleContext, request: Request, session: Session, name: str, status: int = 200, **extra: Any
) -> Response:
    exposure = _exposure_of(ctx, name)
    info = exposure.tool
    others = [t.name for t in ctx.guard.tools() if t.server != info.server]
    findings = scan_tool(info, server=info.server, other_tools=others)
    schema = info.definition.input_schema
    annotations = info.definition.annotations
    values: dict[str, Any] = {
        "exposure": exposure, "info": info, "schema": schema, "fields": fields_of(schema), "findings": findings,
        "annotations": annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {},
        "raw_field": RAW_FIELD, "form": {}, "result": None, "error": None, "hint": None, "is_error": False,
        "title": f"Tool {name}",
    }  # fmt: skip
    values.update(extra)
    return ctx.render(request, session, "tool.html", status, **values)


@page("execute")
async def tool_call(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    name = request.path_params["name"]
    exposure = _exposure_of(ctx, name)
    form = await form_of(request)
    try:
        arguments = arguments_from(form, fields_of(exposure.tool.definition.input_schema))
        result = await ctx.guard.call_tool(exposure.tool, arguments, caller=_caller(session))
    except MCPMuxError as exc:  # refused, not approved, failed: shown beside the form, as the CLI prints it
        return _tool_page(ctx, request, session, name, 400 if isinstance(exc, UsageError) else 200, form=form,
                          error=str(exc), hint=exc.hint)  # fmt: skip
    blocks = blocks_of(result)
    return _tool_page(ctx, request, session, name, form=form, result=blocks, is_error=bool(result.is_error))


# -- resources and prompts ---------------------------------------------------------------------


@page("read")
async def resources(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    listed = sorted(ctx.guard.resources(), key=lambda r: (r.server, r.uri))
    return ctx.render(request, session, "resources.html", resources=listed, title="Resources")


@page("execute")
async def resource_read(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    form = await form_of(request)
    server_name, uri = form.get("server", ""), form.get("uri", "")
    result = await ctx.guard.read_resource(server_name, uri, caller=_caller(session))
    return ctx.render(request, session, "result.html", blocks=blocks_of(result), title=f"{server_name}: {uri}",
                      is_error=False)  # fmt: skip


@page("read")
async def prompts(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    listed = sorted(ctx.guard.prompts(), key=lambda p: p.name)
    return ctx.render(request, session, "prompts.html", prompts=listed, title="Prompts")


@page("execute")
async def prompt_render(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    form = await form_of(request)
    prompt = ctx.guard.resolve_prompt(form.get("name", ""))
    arguments = {name: form[f"arg.{name}"] for name, _ in prompt.arguments if form.get(f"arg.{name}")}
    result = await ctx.guard.get_prompt(prompt, arguments, caller=_caller(session))
    return ctx.render(request, session, "result.html", blocks=blocks_of(result), title=f"Prompt {prompt.name}",
                      is_error=False)  # fmt: skip


# -- approvals ---------------------------------------------------------------------------------


@page("read")
async def approvals(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    held = ctx.pending.held() if ctx.pending is not None else []
    withheld = [e for e in ctx.guard.withheld() if e.kind == "quarantined"]
    pins = [{"exposure": e, "diff": e.verdict.pin.diff() if e.verdict and e.verdict.pin else ""} for e in withheld]
    return ctx.render(request, session, "approvals.html", held=held, pins=pins, holding=ctx.pending is not None,
                      now=time.time(), title="Approvals")  # fmt: skip


@page("admin")
async def approval_answer(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    if ctx.pending is None:
        raise UsageError("calls are not held for approval here", hint="security.gateway_approvers.console: true")
    answer = ANSWERS.get((await form_of(request)).get("decision", ""))
    if answer is None:
        raise UsageError("the decision must be yes, always-tool or no")
    ctx.pending.answer(request.path_params["id"], answer, by=_caller(session))
    return _back("/approvals")


@page("admin")
async def pin_approve(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    form = await form_of(request)
    server_name, tool_name = form.get("server", ""), form.get("tool", "")
    if server_name not in ctx.guard.servers:
        raise NotFound("server", server_name, [])
    if ctx.guard.approve(server_name, tool_name or None) == 0:
        raise NotFound("held definition", f"{server_name}:{tool_name}", [], hint="it was approved already")
    return _back("/approvals")


# -- audit -------------------------------------------------------------------------------------


async def _off_the_loop(work: Callable[[], _T]) -> _T:
    """Run ``work`` in a worker thread: a read of the audit log first waits for the appender to write its
    queue, and rendering many rows is long; on the event loop both would hold every ``/mcp`` call
    (``bench/bench_console_stall.py``). The servers pages stay on the loop: their figures are kept a few
    seconds, and a thread's hand-off cost more there than it saved (measured)."""
    return await anyio.to_thread.run_sync(work)


AUDIT_FILTERS = ("since", "until", "caller", "server", "tool", "outcome")


def _epoch(value: str) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise UsageError(f"{value!r} is not a date and time", hint="YYYY-MM-DDTHH:MM (UTC)") from None


def _audit_rows(
    ctx: ConsoleContext, request: Request, limit: int, offset: int
) -> tuple[list[AuditRow], dict[str, str]]:
    given = {k: request.query_params.get(k, "").strip() for k in AUDIT_FILTERS}
    rows = ctx.guard.audit.query(
        since=_epoch(given["since"]), until=_epoch(given["until"]), caller=given["caller"] or None,
        server=given["server"] or None, tool=given["tool"] or None, outcome=given["outcome"] or None,
        limit=limit, offset=offset,
    )  # fmt: skip
    return rows, given


@page("read")
async def audit(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    try:
        number = max(1, int(request.query_params.get("page", "1")))
    except ValueError:
        number = 1
    rows, given = await _off_the_loop(lambda: _audit_rows(ctx, request, PAGE_SIZE + 1, (number - 1) * PAGE_SIZE))
    filters = urlencode({k: v for k, v in given.items() if v})
    return await _off_the_loop(
        lambda: ctx.render(request, session, "audit.html", rows=rows[:PAGE_SIZE], more=len(rows) > PAGE_SIZE,
                           page=number, given=given, filters=filters, title="Audit")
    )  # fmt: skip


@page("read")
async def audit_export(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    if request.path_params["fmt"] not in ("csv", "json"):
        raise NotFound("export format", request.path_params["fmt"], ["csv", "json"])
    fmt = request.path_params["fmt"]
    disposition = {"Content-Disposition": f"attachment; filename=mcpmux-audit.{fmt}"}
    return await _off_the_loop(lambda: _export(_audit_rows(ctx, request, EXPORT_LIMIT, 0)[0], fmt, disposition))


def _export(rows: list[AuditRow], fmt: str, headers: dict[str, str]) -> Response:
    data = [r.to_json() for r in rows]
    if fmt == "json":
        return JSONResponse(data, headers=headers)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(AuditRow.__dataclass_fields__))
    writer.writeheader()
    for row in data:
        writer.writerow({k: json.dumps(v) if k == "args" else v for k, v in row.items()})
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)


# -- sources -----------------------------------------------------------------------------------


@page("read")
async def sources(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    runtime = ctx.sources
    listed = await runtime.registry_call(runtime.registry.all) if runtime is not None else []
    return ctx.render(request, session, "sources.html", sources=listed, served=runtime is not None, title="Sources")


@page("admin")
async def source_sync(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    runtime = _registry_runtime(ctx)
    key = (await form_of(request)).get("key", "")
    if key in runtime.configured():
        raise UsageError(f"{key!r} comes from a configuration file", hint="sync registered sources only")
    await runtime.sync(key)
    return _back("/sources")


@page("admin")
async def source_add(ctx: ConsoleContext, request: Request, session: Session) -> Response:
    runtime = _registry_runtime(ctx)
    form = await form_of(request)
    kind = form.get("source_type", "")
    body: dict[str, Any] = {"name": form.get("name", ""), "description": form.get("description", ""),
                            "source_type": kind, "url": form.get("url") or None}  # fmt: skip
    if kind == "openapi" and form.get("base_url"):
        body["openapi_config"] = {"base_url": form["base_url"]}
    try:
        await register_source(runtime, SourceCreate.model_validate(body), network_caller=session.token_name is not None)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"the source is not valid: {problems}") from None
    except ApiProblem as exc:
        raise UsageError(f"{exc.title}: {exc.detail}") from None
    return _back("/sources")


def _registry_runtime(ctx: ConsoleContext) -> Any:
    runtime = ctx.sources
    if runtime is None:
        raise UsageError("the source registry is not served here", hint="serve with the REST API (no --no-api)")
    return runtime


Route = tuple[str, Callable[[ConsoleContext, Request], Awaitable[Response]], list[str]]
ROUTES: list[Route] = [
    ("", home, ["GET"]),
    ("/", home, ["GET"]),
    ("/login", login_page, ["GET"]),
    ("/login", login, ["POST"]),
    ("/logout", logout, ["POST"]),
    ("/servers", servers, ["GET"]),
    ("/servers/{name}", server, ["GET"]),
    ("/servers/{name}/{action}", server_action, ["POST"]),
    ("/tools", tools, ["GET"]),
    ("/tools/{name}", tool, ["GET"]),
    ("/tools/{name}/call", tool_call, ["POST"]),
    ("/resources", resources, ["GET"]),
    ("/resources/read", resource_read, ["POST"]),
    ("/prompts", prompts, ["GET"]),
    ("/prompts/render", prompt_render, ["POST"]),
    ("/approvals", approvals, ["GET"]),
    ("/approvals/pins", pin_approve, ["POST"]),
    ("/approvals/{id}", approval_answer, ["POST"]),
    ("/audit", audit, ["GET"]),
    ("/audit/export.{fmt:str}", audit_export, ["GET"]),
    ("/sources", sources, ["GET"]),
    ("/sources/sync", source_sync, ["POST"]),
    ("/sources/add", source_add, ["POST"]),
]
