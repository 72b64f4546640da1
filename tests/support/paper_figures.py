"""The original's render scripts run on a results database: the CSV companions of the paper's
figures, as its own code computes them.

The scripts are vendored whole and unchanged in tests/support/tml_bench_original
(``render_v6_leaderboard_plots.py``, ``render_v6_key_results_plots.py`` and the two scripts
they take their constants from); their ``main()`` is run as ``python scripts/<script>.py
--out-dir DIR`` would run it, and the CSVs it writes are read back. Two things differ from
running them in the original's checkout, neither of them arithmetic:

* matplotlib and seaborn (not dependencies of tmlbench) are replaced, while the scripts are
  imported and only for them, by an inert module whose every attribute and call returns itself:
  the plotting lines run and draw nothing (no PNG is written). The scripts' arithmetic never
  reads anything back from a plot.
* the module constants naming the inputs are set for the run and restored after it:
  ``REPO_ROOT`` and ``SOURCE_DBS`` (which databases: here the one given) and
  ``CANONICAL_MODELS`` (the paper's frozen set of complete models: here the database's).
  ``COMPETITIONS`` and ``PROFILES`` stay the paper's.
"""

from __future__ import annotations

import functools
import importlib
import sys
import types
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd

PACKAGE = "tests.support.tml_bench_original"
SCRIPTS = ("render_v6_leaderboard_plots", "render_v6_key_results_plots")
TABLES_SCRIPT = "update_profiled1_fiverun_tables"  # results.md's 5-run tables: who is complete
PLOTTING = ("matplotlib", "matplotlib.pyplot", "seaborn")

# The CSVs the two scripts write (the paper's docs/paper/paper_assets_v3/tables/*.csv).
TABLES = (
    "leaderboard_scores",
    "consistency_ranks_by_competition",
    "consistency_rank_stddev",
    "reliability_success_rates",
    "reliability_stability_rel_iqr",
    "reliability_pareto_table",
    "scaling_points_by_budget",
    "scaling_marginal_gains",
    "scaling_monotonicity",
)


class _Inert(types.ModuleType):
    """A module whose every attribute, call and result is itself: plotting that draws nothing."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (__path__, __spec__, …)
            raise AttributeError(name)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return self


@functools.cache
def scripts() -> tuple[types.ModuleType, ...]:
    """The vendored render scripts, imported with matplotlib and seaborn inert."""
    inert = {name: _Inert(name) for name in PLOTTING}
    with mock.patch.dict(sys.modules, inert):
        return tuple(importlib.import_module(f"{PACKAGE}.{name}") for name in SCRIPTS)


def render(db: Path, canonical_models: list[tuple[str, str]], out_dir: Path) -> dict[str, Any]:
    """Run both scripts' ``main()`` on ``db`` for ``canonical_models`` ((provider, model_id));
    the tables they wrote to ``out_dir``, by name (``TABLES``)."""
    inputs = {
        "REPO_ROOT": db.parent,
        "SOURCE_DBS": [db.name],
        "CANONICAL_MODELS": canonical_models,
    }
    for script in scripts():
        with (
            mock.patch.multiple(script, **inputs),
            mock.patch.object(sys, "argv", [f"{script.__name__}.py", "--out-dir", str(out_dir)]),
            warnings.catch_warnings(),
        ):
            # pandas 2.3 warns that the leaderboard script's fillna(0.5) on an object column
            # will stop downcasting in pandas 3; today it still gives the script's floats.
            warnings.simplefilter("ignore", FutureWarning)
            assert script.main() == 0
    return {name: pd.read_csv(out_dir / f"{name}.csv") for name in TABLES}


def complete_models(db: Path) -> list[str]:
    """The model ids the paper's own rule finds complete in ``db`` (5 successes in every one of
    the 12 competition × profile cells): the list ``update_profiled1_fiverun_tables`` writes
    into results.md ("Complete models in scope"), from which the paper froze its
    ``CANONICAL_MODELS``."""
    tables = importlib.import_module(f"{PACKAGE}.{TABLES_SCRIPT}")
    with mock.patch.multiple(tables, REPO_ROOT=db.parent, SOURCE_DBS=[db.name]):
        lines = tables._render_tables().splitlines()
    start = lines.index("Complete models in scope:") + 1
    end = lines.index("", start)
    return [line.strip("- `") for line in lines[start:end]]
