"""The original TML-bench harness's own code, vendored unchanged.

From MykolaPinchuk/TML-bench (MIT licence, LICENSE.md here), ``orchestrator/result.py`` at
87c69fbc4c64d847856bea09220540cfc9b8914d: ``RunResult``, ``make_result``,
``write_result_json``. The importer's tests build runs as this ``RunResult`` and write
result.json trees with this code, so they test against the format as the original writes it
rather than a description of it. Its results database is written by
tests/support/tml_bench_db.py, one writer for every generation of ``orchestrator/db.py``'s
schema, which replaced the vendored ``db.py`` copies of three generations (its docstring says
how it was checked against each commit's own ``db.py``).

From ``scripts/`` at the same commit, whole (plotting included), the paper's render scripts
and the two they take their constants from:

* ``render_v6_leaderboard_plots.py`` (``leaderboard_scores.csv``: the three leaderboard
  variants on min-max points) and ``render_v6_key_results_plots.py`` (ranks per competition and
  their std, success rates, relative-IQR stability, the performance/stability table, points by
  budget, marginal gains, monotonicity);
* ``update_profiled1_fiverun_tables.py`` (``COMPETITIONS``, ``PROFILES``, ``SOURCE_DBS``) and
  ``check_profiled1_canonical_coverage.py`` (``CANONICAL_MODELS``).

The only change: their imports of each other (``from check_profiled1_canonical_coverage
import``, ``from update_profiled1_fiverun_tables import``) are made relative (``from .…``).
``scripts/render_public_paper_figures_v2.py`` is not vendored: it only re-plots the CSVs these
write (no arithmetic). tests/support/paper_figures.py runs them (plotting made inert) on a
database and reads their CSVs.
"""
