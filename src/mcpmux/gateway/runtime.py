"""How the ``mcpmux serve`` process runs: its event loop, and the SDK's tracing when nobody collects it.

Both are choices for a whole process, so only the command line makes them: a program that uses
:func:`mcpmux.serve.serve` as a library keeps its own loop and its own tracing.

Measured with ``bench/bench_gateway.py`` and callgrind (instructions per proxied call, HTTP face,
stdio upstream): asyncio's loop 2.99 M, uvloop 2.52 M (-16 %); without the SDK's no-op client
spans a further -3.4 %.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

from opentelemetry.trace import INVALID_SPAN, ProxyTracerProvider, Span, get_tracer_provider

from mcpmux.types.json_shapes import JSONObject

__all__ = ["loop_options", "quiet_sdk_tracing"]

logger = logging.getLogger(__name__)


def loop_options() -> JSONObject:
    """anyio's backend options: uvloop where it is installed (not on Windows), else asyncio's own loop."""
    if importlib.util.find_spec("uvloop") is None:
        return {}
    return {"use_uvloop": True}


@contextlib.contextmanager
def _no_span(*args: Any, **kwargs: Any) -> Iterator[Span]:
    yield INVALID_SPAN


def _no_trace_context(meta: JSONObject) -> None:
    return None


def quiet_sdk_tracing() -> bool:
    """Stop the SDK opening a span and injecting trace context for every request it sends.

    Only when no OpenTelemetry tracer provider is configured: then each span records nothing, yet
    entering and leaving it costs ~3 % of a proxied call. The gateway drops the server-side span
    itself (:class:`~mcpmux.gateway.server.Gateway`); this is the client side, toward the
    upstreams, which the SDK keeps in a module of its dispatcher. Returns whether it took effect.
    """
    if not isinstance(get_tracer_provider(), ProxyTracerProvider):
        return False
    from mcp.shared import jsonrpc_dispatcher

    if not hasattr(jsonrpc_dispatcher, "otel_span") or not hasattr(jsonrpc_dispatcher, "inject_trace_context"):
        logger.debug("the SDK's dispatcher no longer traces through otel_span; nothing to quiet")
        return False
    jsonrpc_dispatcher.otel_span = _no_span
    jsonrpc_dispatcher.inject_trace_context = _no_trace_context  # type: ignore[attr-defined]
    return True
