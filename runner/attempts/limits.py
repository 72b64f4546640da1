"""The caps an attempt can break, each of which ends it.

Named once for both sides: the sandbox that enforces them and says which one was broken
(``runner.sandbox.lifecycle.classify``), and the run record that keeps it (``limit_exceeded``).
A leaf module, so the record contract does not import the sandbox backends.

``memory``, ``pids`` and ``disk`` are the kernel's; ``spend`` is kept outside the sandbox, by
the provider gateway (its per-attempt ceilings on model calls, tokens and cost), and reaches
the sandbox as a :class:`WatchedCap`.
"""

from __future__ import annotations

from typing import Literal, Protocol

Limit = Literal["memory", "pids", "disk", "spend"]


class WatchedCap(Protocol):
    """A cap kept outside the sandbox: the sandbox ends the attempt at once when it breaks."""

    @property
    def limit(self) -> Limit: ...

    def broken(self) -> str | None:
        """None while it holds; once broken, a note saying how (for the record)."""
        ...
