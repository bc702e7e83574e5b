"""The gateway face: every configured server re-served as one MCP server (``mcpmux serve``).

::

    from mcpmux.gateway import Gateway, HttpOptions, build_app

``mcpmux serve`` itself (one process: /mcp, /api, /ui, /metrics) is :mod:`mcpmux.serve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpmux import _moved
from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.gateway.downstream import Downstream as Downstream
    from mcpmux.gateway.http import (
        HttpOptions as HttpOptions,
        build_app as build_app,
        serve_http as serve_http,
    )
    from mcpmux.gateway.metrics import Metrics as Metrics
    from mcpmux.gateway.server import Gateway as Gateway
    from mcpmux.gateway.surface import (
        Surface as Surface,
        build_surface as build_surface,
    )
    from mcpmux.web.security import HttpSecurity as HttpSecurity
    from mcpmux.web.tokens import TokenStore as TokenStore

_exported, __dir__ = lazy_exports(__name__, __file__)


def __getattr__(name: str) -> Any:
    """The package's names; those that moved to :mod:`mcpmux.serve` still answer, with a warning."""
    if name in _moved.NAMES[__name__]:
        return _moved.moved_name(__name__, name)
    return _exported(name)
