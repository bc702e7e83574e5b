"""Gateway metrics in the Prometheus text exposition format (version 0.0.4), written by hand.

Counters of calls and errors and a latency histogram per server and tool, one gauge per
upstream state, and a replica's view of its peers, enough for ``/metrics`` without a client library.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpmux.processes.usage import process_usage
from mcpmux.types import ServerStatus

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS_S", "Metrics"]

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS_S))
    count: int = 0
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        index = bisect.bisect_left(LATENCY_BUCKETS_S, seconds)
        if index < len(self.buckets):
            self.buckets[index] += 1
        self.count += 1
        self.total += seconds


class Metrics:
    """Call counters and latencies of one gateway process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str, str], int] = defaultdict(int)
        self._latency: dict[tuple[str, str], _Histogram] = defaultdict(_Histogram)
        # (hits, misses) per (server, tool) of the guard's result cache, read at each scrape.
        self.cache_stats: Callable[[], dict[tuple[str, str], tuple[int, int]]] | None = None

    def observe_call(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        """Count one call (``outcome``: ``ok``, ``tool_error`` or ``error``) and its latency."""
        with self._lock:
            self._calls[(server, tool, outcome)] += 1
            self._latency[(server, tool)].observe(seconds)

    def render(self, statuses: Iterable[ServerStatus], replica: Mapping[str, Any] | None = None) -> str:
        """The exposition text of every metric, with the upstream states from ``statuses`` and, for a
        replica, its view of the others (``Cluster.to_json()``)."""
        with self._lock:
            lines = [*self._render_calls(), *self._render_latency()]
        lines += _render_states(statuses)
        if self.cache_stats is not None:
            lines += _render_cache(self.cache_stats())
        if replica is not None:
            lines += _render_replica(replica)
        return "\n".join(lines) + "\n"

    def _render_calls(self) -> list[str]:
        lines = [
            "# HELP mcpmux_gateway_calls_total Tool calls through the gateway.",
            "# TYPE mcpmux_gateway_calls_total counter",
        ]
        errors = [
            "# HELP mcpmux_gateway_errors_total Tool calls that failed.",
            "# TYPE mcpmux_gateway_errors_total counter",
        ]
        for (server, tool, outcome), count in sorted(self._calls.items()):
            labels = _labels(server=server, tool=tool, outcome=outcome)
            lines.append(f"mcpmux_gateway_calls_total{labels} {count}")
            if outcome != "ok":
                errors.append(f"mcpmux_gateway_errors_total{labels} {count}")
        return lines + errors

    def _render_latency(self) -> list[str]:
        name = "mcpmux_gateway_call_duration_seconds"
        lines = [f"# HELP {name} Tool call latency through the gateway.", f"# TYPE {name} histogram"]
        for (server, tool), histogram in sorted(self._latency.items()):
            cumulative = 0
            for bound, count in zip(LATENCY_BUCKETS_S, histogram.buckets, strict=True):
                cumulative += count
                lines.append(f"{name}_bucket{_labels(server=server, tool=tool, le=repr(bound))} {cumulative}")
            lines.append(f"{name}_bucket{_labels(server=server, tool=tool, le='+Inf')} {histogram.count}")
            lines.append(f"{name}_sum{_labels(server=server, tool=tool)} {histogram.total:.6f}")
            lines.append(f"{name}_count{_labels(server=server, tool=tool)} {histogram.count}")
        return lines


def _render_states(statuses: Iterable[ServerStatus]) -> list[str]:
    name = "mcpmux_upstream_up"
    lines = [f"# HELP {name} 1 for the state each upstream is in.", f"# TYPE {name} gauge"]
    rss = [
        "# HELP mcpmux_upstream_rss_bytes Resident memory of a stdio upstream and its descendants.",
        "# TYPE mcpmux_upstream_rss_bytes gauge",
    ]
    cpu = [
        "# HELP mcpmux_upstream_cpu_seconds_total CPU time (user + system) of a stdio upstream and its descendants.",
        "# TYPE mcpmux_upstream_cpu_seconds_total counter",
    ]
    for status in statuses:
        lines.append(f"{name}{_labels(server=status.name, state=status.state.value)} 1")
        usage = process_usage(status.pid)
        if usage is not None:
            rss.append(f"mcpmux_upstream_rss_bytes{_labels(server=status.name)} {usage.rss_bytes}")
            cpu.append(f"mcpmux_upstream_cpu_seconds_total{_labels(server=status.name)} {usage.cpu_seconds:.2f}")
    return lines + rss + cpu


def _render_cache(stats: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    lines: list[str] = []
    helps = ("Cacheable tool calls answered from the cache.", "Cacheable tool calls that went to the server.")
    for index, (kind, help_text) in enumerate(zip(("hits", "misses"), helps, strict=True)):
        name = f"mcpmux_cache_{kind}_total"
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
        lines += [f"{name}{_labels(server=s, tool=t)} {counts[index]}" for (s, t), counts in sorted(stats.items())]
    return lines


def _render_replica(replica: Mapping[str, Any]) -> list[str]:
    me = str(replica["id"])
    lines = [
        "# HELP mcpmux_replica_info This replica (value 1).",
        "# TYPE mcpmux_replica_info gauge",
        f"mcpmux_replica_info{_labels(replica=me, advertise=str(replica['advertise']))} 1",
        "# HELP mcpmux_replica_listening 1 while this replica hears the others' events.",
        "# TYPE mcpmux_replica_listening gauge",
        f"mcpmux_replica_listening {int(bool(replica['listening']))}",
        "# HELP mcpmux_replica_peer_sessions Open sessions of each live replica (at its last heartbeat).",
        "# TYPE mcpmux_replica_peer_sessions gauge",
    ]
    peers = list(replica["peers"])
    lines += [f"mcpmux_replica_peer_sessions{_labels(peer=str(p['id']))} {p['sessions']}" for p in peers]
    lines += [
        "# HELP mcpmux_replica_peer_in_flight Calls in flight on each live replica (at its last heartbeat).",
        "# TYPE mcpmux_replica_peer_in_flight gauge",
    ]
    lines += [f"mcpmux_replica_peer_in_flight{_labels(peer=str(p['id']))} {p['in_flight']}" for p in peers]
    lines += [
        "# HELP mcpmux_replica_forwarded_total Requests this replica sent on to the replica that owns them.",
        "# TYPE mcpmux_replica_forwarded_total counter",
    ]
    forwarded = dict(replica["forwarded"])
    lines += [f"mcpmux_replica_forwarded_total{_labels(to=str(k))} {v}" for k, v in sorted(forwarded.items())]
    lines += [
        "# HELP mcpmux_replica_owner_gone_total Requests whose owning replica was gone (sessions: 404).",
        "# TYPE mcpmux_replica_owner_gone_total counter",
        f"mcpmux_replica_owner_gone_total {replica['owner_gone']}",
    ]
    return lines


def _labels(**labels: str) -> str:
    body = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + body + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
