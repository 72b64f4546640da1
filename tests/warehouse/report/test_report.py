"""``tmlbench report``: the bundle of one suite, read from the session's hand-made snapshot
(``app_snapshot``: suite demo provisional, alpha and beta ranked, gamma not; suite idle without
runs)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.config import REPO_ROOT
from runner.errors import TmlbenchError
from tests.support.tmlbench_cli import tmlbench
from warehouse.report import write_report
from warehouse.report.bundle import html_table, markdown_table
from warehouse.report.figures import FIGURES

# integration: the report of app_snapshot (a dbt build), through the CLI and in chromium
# xdist_group: its module fixtures (two report bundles) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("report")]

TEXT_SUFFIXES = (".csv", ".md", ".json", ".html", ".svg")
ARTIFACTS = REPO_ROOT / "test-artifacts" / "report"  # report.html as chromium shows it


@pytest.fixture(scope="module")
def bundles(app_snapshot: Path, tmp_path_factory: pytest.TempPathFactory):
    """Two reports of demo from one snapshot, each from a connection of its own; the second's
    session in another time zone (a timestamp read as the session's local time would differ)."""
    out = []
    for name, zone in (("first", "UTC"), ("second", "America/New_York")):
        target = tmp_path_factory.mktemp(name) / "demo"
        with duckdb.connect(str(app_snapshot), read_only=True) as con:
            con.execute(f"set TimeZone = '{zone}'")
            out.append((write_report(con, "demo", target), target))
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_two_reports_of_one_warehouse_are_identical_byte_for_byte(bundles):
    (_, first), (_, second) = bundles
    one, two = _files(first), _files(second)
    assert sorted(one) == sorted(two)
    texts = [name for name in one if name.endswith(TEXT_SUFFIXES)]
    assert {"LEADERBOARD.md", "LEADERBOARD.csv", "LEADERBOARD.json", "report.html"} <= set(texts)
    assert [n for n in texts if one[n] != two[n]] == []
    # vl-convert draws PNGs with the machine's own fonts: identical on one machine
    pngs = [n for n in one if n.endswith(".png")]
    assert len(pngs) == len(FIGURES) and [n for n in pngs if one[n] != two[n]] == []


def test_manifest_lists_every_file_with_its_sha256(bundles):
    manifest, root = bundles[0]
    listed = json.loads((root / "manifest.json").read_text())
    on_disk = {name: data for name, data in _files(root).items() if name != "manifest.json"}
    assert listed["files"] == {n: hashlib.sha256(d).hexdigest() for n, d in on_disk.items()}
    assert listed["files"] == manifest.files and listed["provisional"] is True


# figure → (the mart it plots, written independently of the report's own selects; its key)
MART_OF_FIGURE = {
    "leaderboard_best_budget": (
        "select l.rank, l.agent_id, l.score, u.score_low, u.score_high, l.n_cells, "
        "l.score_paper, l.rank_paper "
        "from marts.leaderboard l join marts.leaderboard_uncertainty u using (suite_id, agent_id) "
        "where suite_id = 'demo' and variant = 'best_budget'",
        ["agent_id"],
    ),
    "leaderboard_all_cells": (
        "select rank, agent_id, score, n_cells, score_paper, rank_paper from marts.leaderboard "
        "where suite_id = 'demo' and variant = 'all_cells'",
        ["agent_id"],
    ),
    "leaderboard_largest_budget": (
        "select rank, agent_id, score, n_cells, score_paper, rank_paper from marts.leaderboard "
        "where suite_id = 'demo' and variant = 'largest_budget'",
        ["agent_id"],
    ),
    "success_rates": (
        "select agent_id, success_rate, successes, agent_attempts, attempts, "
        "n_harness_error as harness_errors, n_provider_error as provider_errors "
        "from marts.success_rates where suite_id = 'demo'",
        ["agent_id"],
    ),
    "run_stability": (
        "select agent_id, rel_iqr as run_rel_iqr, n_settings as run_settings "
        "from marts.run_stability where suite_id = 'demo' and rel_iqr is not null",
        ["agent_id"],
    ),
    "performance_vs_stability": (
        "select l.agent_id, l.rank, l.score, r.rel_iqr as run_rel_iqr, "
        "r.n_settings as run_settings from marts.leaderboard l "
        "join marts.run_stability r using (suite_id, agent_id) "
        "where suite_id = 'demo' and variant = 'best_budget' and r.rel_iqr is not null",
        ["agent_id"],
    ),
    "rank_std": (
        "select agent_id, mean_rank, rank_std, n_tasks from marts.rank_stability "
        "where suite_id = 'demo'",
        ["agent_id"],
    ),
    "rank_heatmap": (
        "select agent_id, task_id, best_points, rank from marts.task_ranks where suite_id = 'demo'",
        ["agent_id", "task_id"],
    ),
    "time_scaling": (
        "select agent_id, budget_seconds, mean_points, n_tasks from marts.time_scaling "
        "where suite_id = 'demo'",
        ["agent_id", "budget_seconds"],
    ),
    "marginal_gains": (
        "select * exclude (suite_id) from marts.time_scaling_gains where suite_id = 'demo'",
        ["agent_id", "to_budget_seconds"],
    ),
    "pass_k": (
        "select agent_id, k, mean_pass_k, settings_with_pass_k from marts.agent_pass_k "
        "where suite_id = 'demo' and mean_pass_k is not null",
        ["agent_id", "k"],
    ),
    "expected_worst_points": (
        "select agent_id, k, mean_expected_worst_points, settings_with_worst_points "
        "from marts.agent_pass_k where suite_id = 'demo' "
        "and mean_expected_worst_points is not null",
        ["agent_id", "k"],
    ),
    "monotonicity_rate": (
        "select agent_id, share_monotone, monotone_curves, curves "
        "from marts.time_scaling_monotone where suite_id = 'demo'",
        ["agent_id"],
    ),
    "points_per_dollar": (
        "select agent_id, score, counted_cost_mean_usd, points_per_dollar, cost_total_usd, "
        "attempts_with_cost from marts.agent_costs "
        "where suite_id = 'demo' and points_per_dollar is not null",
        ["agent_id"],
    ),
    "tokens": (
        "select agent_id, direction, tokens from (unpivot (select agent_id, tokens_in_total as "
        '"in", tokens_out_total as "out" from marts.agent_costs where suite_id = \'demo\') '
        'on "in", "out" into name direction value tokens)',
        ["agent_id", "direction"],
    ),
}


def test_every_figure_has_its_files_and_its_csv_equals_the_mart_it_plots(bundles, app_snapshot):
    assert set(MART_OF_FIGURE) == {f.name for f in FIGURES}
    _, root = bundles[0]
    with duckdb.connect(str(app_snapshot), read_only=True) as con:
        for name, (sql, key) in MART_OF_FIGURE.items():
            for suffix in ("png", "svg", "csv"):
                assert (root / "figures" / f"{name}.{suffix}").stat().st_size > 0, name
            written = pd.read_csv(root / "figures" / f"{name}.csv", float_precision="round_trip")
            mart = con.execute(sql).df()
            assert not mart.empty, f"{name}: the fixture has no rows for it"
            assert list(written.columns) == list(mart.columns), name
            # CSV floats are repr: they read back as the same doubles (exact equality)
            pd.testing.assert_frame_equal(
                written.sort_values(key).reset_index(drop=True),
                mart.sort_values(key).reset_index(drop=True),
                check_dtype=False,
                rtol=0,
                atol=0,
                obj=name,
            )


def test_report_html_is_self_contained_says_provisional_first_and_has_every_figure(bundles):
    _, root = bundles[0]
    page = (root / "report.html").read_text()
    first_screen = page[: page.index("<h2>")]
    assert "Provisional" in first_screen and "12 of 18 settings" in first_screen
    for figure in FIGURES:
        assert f"data-figure='{figure.name}'><figcaption>" in page
    assert page.count("<svg") == len(FIGURES)
    assert "src=" not in page and "<script" not in page  # nothing fetched: figures are inline
    provenance = json.loads((root / "provenance.json").read_text())
    assert {r["status"] for r in provenance["status_counts"]} >= {"success"}
    assert all(len(t["task_spec_sha256"]) > 0 for t in provenance["tasks"])


# per figure of report.html: shown (a box on the page, not hidden), its SVG's drawn size, and the
# Vega marks it holds (vl-convert draws each mark group as <g class="mark-... role-mark">)
FIGURE_REPORT = """() => Object.fromEntries([...document.querySelectorAll('figure[data-figure]')]
    .map(figure => {
        const svg = figure.querySelector('svg');
        const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
        return [figure.dataset.figure, {
            shown: figure.checkVisibility() && figure.getBoundingClientRect().height > 0,
            width: box.width, height: box.height,
            marks: svg ? svg.querySelectorAll('g.role-mark > *').length : 0,
        }];
    }))"""


def test_report_html_in_chromium_shows_every_figure_and_fetches_nothing(bundles):
    """report.html opened from the bundle as a reader would (file://) in Debian's chromium: every
    figure with rows is on the page, visible, its SVG drawn at a nonzero size with marks in it, and
    the page asks for nothing beyond itself (a request elsewhere is recorded, then refused)."""
    from playwright.sync_api import sync_playwright

    from tools.streamlit_server import CHROMIUM, CHROMIUM_ARGS

    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing: `make browser-deps` installs chromium"
    manifest, root = bundles[0]
    page_url = (root / "report.html").as_uri()
    with_rows = [f.name for f in FIGURES if f.name not in manifest.empty_figures]
    assert with_rows, "the demo report has figures to look for"
    requests: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("request", lambda request: requests.append(request.url))
            page.route(
                "**/*",
                lambda route: route.continue_() if route.request.url == page_url else route.abort(),
            )
            page.goto(page_url, wait_until="load")
            figures = page.evaluate(FIGURE_REPORT)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        finally:
            browser.close()
    assert requests == [page_url]
    for name in with_rows:
        assert name in figures, f"no <figure data-figure='{name}'> in report.html"
        shown = figures[name]
        assert shown["shown"] and shown["width"] > 0 and shown["height"] > 0, (name, shown)
        assert shown["marks"] > 0, (name, "an SVG with nothing drawn in it")


def test_leaderboard_files_agree(bundles):
    _, root = bundles[0]
    board = pd.read_csv(root / "LEADERBOARD.csv")
    rows = json.loads((root / "LEADERBOARD.json").read_text())["rows"]
    assert pd.DataFrame(rows).columns.tolist() == board.columns.tolist()
    assert [(r["variant"], r["agent_id"]) for r in rows] == list(
        zip(board["variant"], board["agent_id"], strict=True)
    )
    assert board["variant"].drop_duplicates().tolist() == [
        "best_budget",
        "all_cells",
        "largest_budget",
    ]
    assert "| 1 | alpha |" in (root / "LEADERBOARD.md").read_text()


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        ("nope", "unknown suite 'nope'"),
        ("idle", "run: tmlbench bench --suite idle"),
    ],
)
def test_write_report_refuses_an_unknown_or_an_empty_suite(app_snapshot, tmp_path, suite, message):
    with (
        duckdb.connect(str(app_snapshot), read_only=True) as con,
        pytest.raises(TmlbenchError, match=message),
    ):
        write_report(con, suite, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_writes_the_bundle_and_refuses_with_what_to_run(app_snapshot, tmp_path):
    env = {**os.environ, "TMLBENCH_WAREHOUSE": str(tmp_path / "absent.duckdb")}
    out = tmp_path / "bundle"
    done = tmlbench(
        env, "report", "--suite", "demo", "--warehouse", str(app_snapshot), "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert "provisional" in done.stdout and (out / "manifest.json").is_file()
    refused = tmlbench(env, "report", "--suite", "idle", "--warehouse", str(app_snapshot))
    assert (
        refused.returncode != 0 and "tmlbench bench --suite idle" in refused.stdout + refused.stderr
    )
    missing = tmlbench(env, "report", "--suite", "demo")
    assert missing.returncode != 0 and "no warehouse at" in missing.stdout + missing.stderr
    assert "absent.duckdb" in io.StringIO(missing.stdout + missing.stderr).getvalue()


def test_cli_publishes_next_to_the_warehouse_and_replaces_only_a_bundle(app_snapshot, tmp_path):
    warehouse = tmp_path / "w" / "tmlbench.duckdb"
    warehouse.parent.mkdir()
    shutil.copyfile(app_snapshot, warehouse)
    env = {**os.environ, "TMLBENCH_WAREHOUSE": str(warehouse)}
    published = tmp_path / "w" / "reports" / "demo"  # where Dagster's reports asset publishes
    assert tmlbench(env, "report", "--suite", "demo").returncode == 0
    (published / "figures" / "stale.svg").write_text("from an older report")
    again = tmlbench(env, "report", "--suite", "demo")
    assert again.returncode == 0, again.stderr
    assert (published / "manifest.json").is_file()
    assert not (published / "figures" / "stale.svg").exists()  # replaced whole
    assert sorted(p.name for p in published.parent.iterdir()) == ["demo"]  # no staging left
    # a folder that holds anything but a report is never replaced (its content would be deleted)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = tmlbench(env, "report", "--suite", "demo", "--out", str(mine))
    assert refused.returncode != 0 and "is not a report bundle" in refused.stdout + refused.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


# 200 generated cell texts each (ids come from spec files and imported results we did not write)
@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_a_table_cell_is_text_in_markdown_and_html_whatever_it_holds(text):
    frame = pd.DataFrame({"agent_id": [text], "score": [0.5]})
    line = markdown_table(frame).splitlines()[2]
    # exactly the row's own separators: every other | is escaped, nothing breaks the line
    assert re.sub(r"\\.", "", line).count("|") == 3 and "\n" not in line
    assert not re.search(r"(?<!\\)[\[\]<>`*_!]", line.split("|")[1])
    cells: list[str] = []

    class Cells(HTMLParser):
        def handle_starttag(self, tag, attrs):
            assert tag in {"div", "table", "thead", "tbody", "tr", "th", "td"}, tag
            if tag == "td":
                cells.append("")

        def handle_data(self, data):
            if cells:
                cells[-1] += data

    parser = Cells(convert_charrefs=True)
    parser.feed(html_table(frame))
    parser.close()
    assert cells == [text, "0.5000"]  # the text itself, as text; no element of its own


def test_a_suite_without_a_ranked_agent_gets_a_report_that_says_so(app_snapshot, tmp_path):
    with duckdb.connect(str(app_snapshot), read_only=True) as con:
        manifest = write_report(con, "other", tmp_path)  # 0 of 1 settings complete
    assert manifest.provisional and "leaderboard_best_budget" in manifest.empty_figures
    assert "success_rates" not in manifest.empty_figures  # its attempts still count
    assert not (tmp_path / "figures" / "leaderboard_best_budget.csv").exists()
    for name in ("LEADERBOARD.md", "LEADERBOARD.html", "report.html"):
        text = (tmp_path / name).read_text()
        assert "No agent is ranked yet" in text and "Provisional" in text, name


@pytest.mark.parametrize("in_one_step", [True, False], ids=["renameat2", "two renames"])
def test_swap_puts_the_new_bundle_in_place_and_the_old_one_where_the_new_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_one_step: bool
):
    from warehouse.report import publish

    if not in_one_step:  # a system without renameat2 (or a file system that cannot exchange)
        monkeypatch.setattr(publish, "_exchange", lambda a, b: False)
    published, new = tmp_path / "demo", tmp_path / ".demo.1.tmp"
    for folder, text in ((published, "old"), (new, "new")):
        (folder / "figures").mkdir(parents=True)
        (folder / "report.html").write_text(text)
    (published / "figures" / "gone.svg").write_text("old")
    publish.swap(new, published)
    assert (published / "report.html").read_text() == "new"
    assert not (published / "figures" / "gone.svg").exists()
    assert (new / "report.html").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".demo.1.tmp", "demo"]


@pytest.mark.parametrize("suite_id", ["../up", "a/b", ".hidden", "", "..", "x y"])
def test_a_suite_id_that_is_no_plain_folder_name_names_no_report_folder(
    tmp_path: Path, suite_id: str
):
    from warehouse.report.publish import bundle_folder

    with pytest.raises(TmlbenchError, match="cannot name a report folder"):
        bundle_folder(tmp_path, suite_id)
    assert bundle_folder(tmp_path, "tml-v1.llm_2") == tmp_path / "tml-v1.llm_2"
