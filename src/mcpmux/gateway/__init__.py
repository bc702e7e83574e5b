"""The gateway face: every configured server re-served as one MCP server (``mcpmux serve``).

::

    from mcpmux.gateway import ServeOptions, HttpOptions, serve
    await serve(load_config(), ServeOptions(http=HttpOptions(port=8765)))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.gateway.downstream import Downstream as Downstream
    from mcpmux.gateway.http import (
        HttpOptions as HttpOptions,
        build_app as build_app,
        serve_http as serve_http,
    )
    from mcpmux.gateway.metrics import Metrics as Metrics
    from mcpmux.gateway.run import (
        ServeOptions as ServeOptions,
        http_security as http_security,
        serve as serve,
    )
    from mcpmux.gateway.security import HttpSecurity as HttpSecurity
    from mcpmux.gateway.server import Gateway as Gateway
    from mcpmux.gateway.surface import (
        Surface as Surface,
        build_surface as build_surface,
    )
    from mcpmux.gateway.tokens import TokenStore as TokenStore

__getattr__, __dir__ = lazy_exports(__name__, __file__)
