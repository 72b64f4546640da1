"""``tmlbench report``: a suite's reproducible bundle of every figure and table.

``write_report(con, suite_id, out_dir) -> ReportManifest`` (warehouse/report/bundle.py) reads one
suite from the marts and display models of an open warehouse or snapshot and writes:

- ``figures/<name>.png``, ``.svg`` and ``.csv`` per figure (warehouse/report/figures.py): the
  CSV holds exactly the rows the chart plots, with the models' column names;
- ``LEADERBOARD.md``, ``.csv``, ``.json``, ``.html``: the three variants, best first;
- ``report.html``: one self-contained page (figures inline as SVG, tables, the rules, and
  ``provenance.json``'s content);
- ``manifest.json``: every other file with its sha256.

``publish_report`` (warehouse/report/publish.py) writes it to ``<reports>/<suite>/`` replacing the
previous bundle in one step (Dagster's ``reports`` asset); ``report_zip`` packs it as a zip (the
dashboard's download).

The charts are the dashboard's own (warehouse/report/charts.py), rendered without a browser
(warehouse/report/render.py). No module here imports Streamlit (tests/test_layout.py).
"""

from warehouse.report.bundle import ReportManifest, write_report
from warehouse.report.publish import publish_report, report_zip

__all__ = ["ReportManifest", "publish_report", "report_zip", "write_report"]
