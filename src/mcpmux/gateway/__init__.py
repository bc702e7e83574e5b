"""The gateway face: every configured server re-served as one MCP server (``mcpmux serve``).

::

    from mcpmux.gateway import ServeOptions, HttpOptions, serve
    await serve(load_config(), ServeOptions(http=HttpOptions(port=8765)))
"""

from mcpmux.gateway.downstream import Downstream
from mcpmux.gateway.http import HttpOptions, build_app, serve_http
from mcpmux.gateway.metrics import Metrics
from mcpmux.gateway.run import ServeOptions, http_security, serve
from mcpmux.gateway.security import HttpSecurity
from mcpmux.gateway.server import Gateway
from mcpmux.gateway.surface import Surface, build_surface
from mcpmux.gateway.tokens import TokenStore

__all__ = [
    "Downstream",
    "Gateway",
    "HttpOptions",
    "HttpSecurity",
    "Metrics",
    "ServeOptions",
    "Surface",
    "TokenStore",
    "build_app",
    "build_surface",
    "http_security",
    "serve",
    "serve_http",
]
