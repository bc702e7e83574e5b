"""Mounting apps side by side on one ASGI server: the console at ``/ui`` beside the REST API."""

from __future__ import annotations

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CONSOLE_PREFIX", "ByPrefix"]

CONSOLE_PREFIX = "/ui"


class ByPrefix:
    """Requests under ``prefix`` to ``app``, the others to ``rest`` (404 without one)."""

    def __init__(self, prefix: str, app: ASGIApp, rest: ASGIApp | None) -> None:
        self.prefix, self.app, self.rest = prefix, app, rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "lifespan":
            if self.rest is not None:
                await self.rest(scope, receive, send)
            return
        if path == self.prefix or path.startswith(self.prefix + "/"):
            await self.app(scope, receive, send)
        elif self.rest is not None:
            await self.rest(scope, receive, send)
        else:
            await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
