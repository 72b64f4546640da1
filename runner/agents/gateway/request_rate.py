"""The agent spec's request rate, enforced by the gateway before anything reaches the provider.

A 429 the agent provokes by calling faster than its spec allows must stay the agent's: the
gateway refuses such calls itself (429 + Retry-After, never forwarded) and counts them apart,
so every 429 the provider sends while the agent keeps to its rate is the provider's fault.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class RequestRate:
    """At most ``per_minute`` model calls started in any 60-second window (a sliding window:
    bursts are fine as long as the minute's count holds)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        if per_minute < 1:
            raise ValueError(f"requests_per_minute must be at least 1, got {per_minute!r}")
        self.per_minute = per_minute
        self._clock = clock
        self._starts: collections.deque[float] = collections.deque()
        self._lock = threading.Lock()

    def admit(self) -> int | None:
        """None if a call may start now (it is counted); else whole seconds to wait."""
        with self._lock:
            now = self._clock()
            while self._starts and self._starts[0] <= now - WINDOW_SECONDS:
                self._starts.popleft()
            if len(self._starts) < self.per_minute:
                self._starts.append(now)
                return None
            return max(1, math.ceil(self._starts[0] + WINDOW_SECONDS - now))
