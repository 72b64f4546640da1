"""The closed vocabularies of a task: its type and which way its metric is better.

Declared once for the task spec (``task_type``, ``metric.direction``), the metric registry
(``runner.tasks.metrics``) and the run record (``metric_direction``). A leaf module, so the spec and
record contracts do not import numpy through the metric registry.
"""

from __future__ import annotations

from typing import Literal

Direction = Literal["maximize", "minimize"]
TaskType = Literal["binary", "regression"]
