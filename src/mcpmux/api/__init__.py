"""The REST API face: sources, their tools, execution under policy (FastAPI, under ``/api``).

:func:`~mcpmux.api.serve.build_api` makes the ASGI app; ``mcpmux api`` serves it.
"""

from __future__ import annotations

__all__: list[str] = []
