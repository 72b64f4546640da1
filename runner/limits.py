"""The caps an attempt can break, each of which ends it.

Named once for both sides: the sandbox that enforces them and says which one was broken
(``runner.sandbox.lifecycle.classify``), and the run record that keeps it (``limit_exceeded``).
A leaf module, so the record contract does not import the sandbox backends.
"""

from __future__ import annotations

from typing import Literal

Limit = Literal["memory", "pids", "disk"]
