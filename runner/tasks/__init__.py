"""Tasks: what a task is made of before any agent sees it.

Offline twins (``twins``), preparing a task's public and private files (``preparation``), a
prepared task's files on disk and the check of its public ones (``prepared_files``, ``manifest``), the
metric registry (``metrics``), the task's closed vocabularies (``vocabulary``) and the
instructions an agent reads (``instructions``).

The surface below is what code outside ``runner/`` imports (see ``runner.rooms``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.rooms import lazy_surface

if TYPE_CHECKING:
    from runner.tasks.metrics import Metric as Metric
    from runner.tasks.metrics import get_metric as get_metric
    from runner.tasks.prepared_files import PreparedTask as PreparedTask
    from runner.tasks.prepared_files import prepared_task as prepared_task
    from runner.tasks.vocabulary import Direction as Direction
    from runner.tasks.vocabulary import TaskType as TaskType

__getattr__ = lazy_surface(__name__)
