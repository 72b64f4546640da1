"""One attempt: fresh workspace → agent in a sandbox under a hard budget → grading → record.

Running it (``attempt``), its run folder claimed, started and finished (``run_folder``), the
caps that end it (``limits``), its one verdict (``verdicts``) and the run record that keeps it
(``records``: the unit everything downstream counts).

The surface below is what code outside ``runner/`` imports (see ``runner.rooms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.rooms import lazy_surface

if TYPE_CHECKING:
    from runner.attempts.records import RECORD_FILE as RECORD_FILE
    from runner.attempts.records import RECORD_SCHEMA_VERSION as RECORD_SCHEMA_VERSION
    from runner.attempts.records import STATUSES as STATUSES
    from runner.attempts.records import WORKSPACE_DIR as WORKSPACE_DIR
    from runner.attempts.records import RunRecord as RunRecord
    from runner.attempts.records import load_records as load_records
    from runner.attempts.records import run_space as run_space

__getattr__ = lazy_surface(__name__)
