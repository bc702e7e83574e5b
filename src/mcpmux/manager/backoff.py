"""Reconnect pacing: exponential backoff with full jitter, and a circuit breaker.

Full jitter (a uniform draw between 0 and the exponential bound) spreads the reconnects of many
hosts after a shared outage; the breaker stops a flapping server from being hammered by calls.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass, field

__all__ = ["BACKOFF_BASE_S", "BACKOFF_CAP_S", "CircuitBreaker", "backoff_delay"]

BACKOFF_BASE_S = 0.25
BACKOFF_CAP_S = 30.0


def backoff_delay(attempt: int, *, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S) -> float:
    """Seconds to wait before reconnect ``attempt`` (1-based): uniform in ``[0, min(cap, base * 2**(n-1))]``."""
    bound = min(cap_s, base_s * 2 ** max(attempt - 1, 0))
    return random.uniform(0.0, bound)


@dataclass(slots=True)
class CircuitBreaker:
    """Opens after ``threshold`` failures within ``window_s``; stays open for ``cooldown_s``.

    While open, calls fail fast instead of waiting on a server that keeps failing. A success
    closes it and forgets past failures.
    """

    threshold: int = 5
    window_s: float = 60.0
    cooldown_s: float = 30.0
    _failures: deque[float] = field(default_factory=deque)
    _opened_at: float | None = None

    def record_failure(self, now: float | None = None) -> None:
        """Count one failure; open the circuit if the window holds ``threshold`` of them."""
        now = time.monotonic() if now is None else now
        self._failures.append(now)
        while self._failures and now - self._failures[0] > self.window_s:
            self._failures.popleft()
        if len(self._failures) >= self.threshold:
            self._opened_at = now

    def record_success(self) -> None:
        """Close the circuit and forget every failure."""
        self._failures.clear()
        self._opened_at = None

    def retry_after(self, now: float | None = None) -> float | None:
        """Seconds until the open circuit lets calls through again, or ``None`` when closed."""
        if self._opened_at is None:
            return None
        now = time.monotonic() if now is None else now
        left = self._opened_at + self.cooldown_s - now
        if left <= 0:
            # Half-open: let the next attempt through; one more failure re-opens at once.
            self._opened_at = None
            return None
        return left
