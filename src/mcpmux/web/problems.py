"""Errors of the REST API as one JSON shape: RFC 9457 problem details.

``{"type", "title", "status", "detail"}`` plus ``code`` (the JSON-RPC error code, when the failure
has one) and ``errors`` (every problem, for invalid input). Every :class:`~mcpmux.errors.MCPMuxError`
maps to a status through :data:`STATUS`, by its nearest class.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mcpmux.errors import (
    ApprovalDenied,
    Busy,
    ConfigError,
    MCPMuxError,
    MCPTimeoutError,
    NotFound,
    PolicyError,
    ServerError,
    ServerUnavailable,
    SourceError,
    SourceExists,
    ToolQuarantined,
    TransportError,
    UsageError,
)
from mcpmux.web.security import PROBLEM_MEDIA

__all__ = ["PROBLEM_TYPE", "STATUS", "ApiProblem", "install", "problem_response"]

PROBLEM_TYPE = "https://mcpmux.invalid/problems/"

STATUS: dict[type[BaseException], int] = {
    SourceExists: 409,
    SourceError: 422,
    ConfigError: 422,
    NotFound: 404,
    UsageError: 400,
    ToolQuarantined: 409,
    ApprovalDenied: 403,
    PolicyError: 403,
    Busy: 429,
    ServerUnavailable: 503,
    MCPTimeoutError: 504,
    ServerError: 502,
    TransportError: 502,
    MCPMuxError: 500,
}


class ApiProblem(Exception):
    """A problem the API itself raises (read-only source, missing scope, ...)."""

    def __init__(self, status: int, title: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.title, self.detail = status, title, detail


def problem_response(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    """A problem document with ``status``."""
    slug = title.lower().replace(" ", "-")
    body = {"type": PROBLEM_TYPE + slug, "title": title, "status": status, "detail": detail, **extra}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA, headers=headers)


def _status_of(exc: MCPMuxError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


async def _mcpmux_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MCPMuxError)
    extra: dict[str, Any] = {}
    if isinstance(exc, ServerError):
        extra["code"] = exc.code
    if isinstance(exc, ConfigError):
        extra["errors"] = [str(p) for p in exc.problems]
    if exc.hint:
        extra["hint"] = exc.hint
    return problem_response(_status_of(exc), type(exc).__name__, str(exc), **extra)


async def _api_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiProblem)
    return problem_response(exc.status, exc.title, exc.detail)


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return problem_response(422, "Invalid request", "; ".join(errors)[:2000], errors=errors[:50])


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return problem_response(exc.status_code, str(exc.detail), str(exc.detail))


def install(app: Any) -> None:
    """Make every error of ``app`` a problem document."""
    app.add_exception_handler(MCPMuxError, _mcpmux_error)
    app.add_exception_handler(ApiProblem, _api_problem)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http)
