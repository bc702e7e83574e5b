"""One process for a team: ``mcpmux serve`` mounts /mcp, /api, /ui, /metrics and /healthz on one ASGI server; replicas.

::

    from mcpmux.serve import ServeOptions, serve
    from mcpmux.gateway import HttpOptions
    await serve(load_config(), ServeOptions(http=HttpOptions(port=8765)))

Names load on first use (see ``mcpmux._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpmux._lazy import lazy_exports

if TYPE_CHECKING:
    from mcpmux.serve.run import (
        ServeOptions as ServeOptions,
        http_security as http_security,
        serve as serve,
    )

__getattr__, __dir__ = lazy_exports(__name__, __file__)
