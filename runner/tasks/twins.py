"""Offline twins: seeded generators that stand in for a competition's labelled data.

Each task folder's generator module defines ``generate(n_rows: int, seed: int) -> Twin``.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import ndtr

from runner.errors import SpecError


@dataclass(frozen=True)
class Twin:
    """A labelled table and the true signal behind it.

    ``table`` has the id column, the feature columns and the target column, in the
    competition's column order. ``truth`` is aligned with ``table`` (same index) and holds the
    Bayes-optimal prediction for each row: the true probability of the positive class for
    binary tasks, the noise-free conditional mean for regression. Scoring ``truth`` on the
    private split gives the task's Bayes-optimal holdout score.
    """

    table: pd.DataFrame
    truth: pd.Series


Generator = Callable[[int, int], Twin]


def load_generator(path: Path) -> Generator:
    """Import ``generate`` from a generator file (task folders are not Python packages)."""
    if not path.is_file():
        raise SpecError(f"{path}: twin generator file not found")
    spec = importlib.util.spec_from_file_location(
        f"tmlbench_twin_{path.parent.name.replace('-', '_')}", path
    )
    if spec is None or spec.loader is None:
        raise SpecError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate = getattr(module, "generate", None)
    if not callable(generate):
        raise SpecError(
            f"{path}: must define generate(n_rows: int, seed: int) -> runner.tasks.twins.Twin"
        )
    # A file's signature is known only when it runs; prepare checks the table it returns.
    return cast(Generator, generate)


FloatArray = npt.NDArray[np.float64]


def clipped_normal_mean(mu: FloatArray, sd: float, lo: float, hi: float) -> FloatArray:
    """E[clip(mu + N(0, sd²), lo, hi)]: the Bayes-optimal prediction of a clipped noisy target."""
    a, b = (lo - mu) / sd, (hi - mu) / sd

    def pdf(z: FloatArray) -> FloatArray:
        return np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    return lo * ndtr(a) + hi * (1 - ndtr(b)) + mu * (ndtr(b) - ndtr(a)) + sd * (pdf(a) - pdf(b))
