"""The original TML-bench harness's own code for writing results, vendored unchanged.

From MykolaPinchuk/TML-bench (MIT licence, LICENSE.md here), ``orchestrator/``:

* ``result.py`` and ``db.py`` at 87c69fbc4c64d847856bea09220540cfc9b8914d (the current
  generation: ``RunResult``, ``make_result``, ``write_result_json``; ``ensure_db`` with its
  migrations and the ``baselines`` table; ``insert_run``, ``insert_baseline``);
* ``db_9e850f7.py``: ``db.py`` at 9e850f73ca75f836f2eadf32a34f64d4ed0f6e74, the first
  generation (13 columns, no budget, model or provenance);
* ``db_b923c5e.py``: ``db.py`` at b923c5e5fb61a5b0b5f1a30fa8b90bf2de304700 (budget and model
  metadata, no submission hashes or provenance yet).

The only change is ``from orchestrator.result`` → ``from .result``. The importer's tests write
databases and result.json trees with this code, so they test against the format as the
original writes it rather than a description of it.

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
