"""Results of idempotent tools kept for a while, per server opt-in (``cache: {ttl_s, tools}``).

::

    cache = ResultCache()
    hit = cache.lookup(config, tool, args, caller)      # a result, or None (counted as hit/miss)
    cache.store(config, tool, args, caller, result)

A tool is cached when its server has a ``cache`` block whose ``tools`` globs match its name and it
is annotated ``readOnlyHint`` and ``idempotentHint`` (or the block says ``force: true``). Keys are
the tool and its arguments as canonical JSON (sorted keys, no spaces), so ``{"a":1,"b":2}`` and
``{"b":2,"a":1}`` are one entry. A result's ``ttlMs`` (2026-07-28 servers) shortens the time (0:
not kept); results are kept per caller unless they say ``cacheScope: "public"``. Tool errors are
never kept. Hits and misses are counted per server and tool.
"""

from __future__ import annotations

import fnmatch
import json
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from mcpmux.config.models import ServerConfig
from mcpmux.manager import ToolInfo

__all__ = ["ResultCache", "cache_key"]

MAX_ENTRIES = 1024
_ANYONE = "*"


def cache_key(tool: ToolInfo, arguments: Mapping[str, Any]) -> str:
    """The tool and its arguments as canonical JSON."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{tool.server}\n{tool.tool}\n{canonical}"


class ResultCache:
    """Cached tool results with their expiry, least recently used dropped past :data:`MAX_ENTRIES`."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, str], tuple[float, types.CallToolResult]] = OrderedDict()
        self.hits: dict[tuple[str, str], int] = defaultdict(int)
        self.misses: dict[tuple[str, str], int] = defaultdict(int)

    @staticmethod
    def cacheable(server: ServerConfig, tool: ToolInfo) -> bool:
        """Whether ``server``'s ``cache`` block covers ``tool``."""
        block = server.cache
        if block is None or tool.synthetic or not any(fnmatch.fnmatchcase(tool.tool, g) for g in block.tools):
            return False
        hints = tool.annotations or {}
        return block.force or bool(hints.get("readOnlyHint") and hints.get("idempotentHint"))

    def lookup(self, tool: ToolInfo, arguments: Mapping[str, Any], caller: str | None) -> types.CallToolResult | None:
        """The kept result of this call (for ``caller``, or public), counting a hit or a miss."""
        key, now = cache_key(tool, arguments), self._clock()
        with self._lock:
            for scope in (caller or "", _ANYONE):
                entry = self._entries.get((scope, key))
                if entry is None:
                    continue
                if entry[0] <= now:
                    del self._entries[(scope, key)]
                    continue
                self._entries.move_to_end((scope, key))
                self.hits[(tool.server, tool.tool)] += 1
                return entry[1].model_copy(deep=True)
            self.misses[(tool.server, tool.tool)] += 1
            return None

    def store(
        self,
        server: ServerConfig,
        tool: ToolInfo,
        arguments: Mapping[str, Any],
        caller: str | None,
        result: types.CallToolResult,
    ) -> None:
        """Keep ``result`` for the server's ``ttl_s`` (or the result's shorter ``ttlMs``); errors are not kept."""
        if result.is_error or server.cache is None:
            return
        ttl_s = server.cache.ttl_s
        ttl_ms, cache_scope = _hints(result)
        if ttl_ms is not None:
            ttl_s = min(ttl_s, ttl_ms / 1000)
        if ttl_s <= 0:
            return
        scope = _ANYONE if cache_scope == "public" else (caller or "")
        with self._lock:
            self._entries[(scope, cache_key(tool, arguments))] = (self._clock() + ttl_s, result.model_copy(deep=True))
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)

    def stats(self) -> dict[tuple[str, str], tuple[int, int]]:
        """(hits, misses) per (server, tool)."""
        with self._lock:
            return {k: (self.hits.get(k, 0), self.misses.get(k, 0)) for k in self.hits.keys() | self.misses.keys()}


def _hints(result: types.CallToolResult) -> tuple[float | None, str | None]:
    """The result's ``ttlMs`` and ``cacheScope``: fields where the SDK models them (its
    ``CacheableResult``), else extra fields a result model kept, else ``_meta`` entries."""
    extra = {**(result.meta or {}), **(result.model_extra or {})}
    ttl = getattr(result, "ttl_ms", None)
    ttl = extra.get("ttlMs") if ttl is None else ttl
    scope = getattr(result, "cache_scope", None) or extra.get("cacheScope")
    valid_ttl = float(ttl) if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl >= 0 else None
    return valid_ttl, scope if isinstance(scope, str) else None
