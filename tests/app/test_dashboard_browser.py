"""The Streamlit dashboard renders in a real browser, on every page, without an exception.

A module fixture builds a snapshot the way the pipeline does (records → ``load_runs`` →
``build_marts`` → ``publish_snapshot``) for the three demo baselines, starts
``streamlit run app/streamlit_app.py`` on a free loopback port with ``TMLBENCH_SNAPSHOT``
pointing at it, and drives Debian's ``/usr/bin/chromium`` through Playwright (Playwright's own
browser download is never used). The leaderboard must show the three agents; every page of the
navigation must render without a ``stException`` element, and is screenshotted only once its
tables and Vega-Lite charts are drawn (canvas or SVG marks present, not just the script run
finished). A screenshot of every page, whole, at 1600 px wide, goes to
``test-artifacts/dashboard/<page>.png``. Every page must read like a report at that width
(``check_readable``): the suite picker above its title, listing every suite file; no table wider
than its place (no sideways scroll); human column headers; the run explorer's key columns first;
full task labels and fitted axes in the charts; badge glyphs the browser's font draws. The
Streamlit process group is always terminated.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.attempts.records import write_record
from runner.config import REPO_ROOT
from tests.support.prepared_tasks import make_paths
from tools.dbt_in_process import run_in_process
from tools.dbt_warehouse import SCENARIO_EXCLUDE
from tools.records import make_record
from tools.streamlit_server import (
    APP,
    CHROMIUM,
    CHROMIUM_ARGS,
    MODULE_LOAD_ERROR,
    MODULE_LOAD_FAILED_JS,
    RENDER_TIMEOUT_MS,
    StreamlitServerError,
    open_page,
    streamlit_server,
    wait_until_idle,
)
from warehouse.db import connect
from warehouse.loader import load_runs, load_specs
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

# integration: the published snapshot (a dbt build), the real dashboard (Streamlit) and chromium
# xdist_group: its module fixtures (a dbt build, the dashboard, chromium) are built once, on one worker, not on each
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dashboard_browser")]

PAGES_DIR = REPO_ROOT / "app" / "app_pages"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "dashboard"

AGENTS = {"baseline-gbm": 0.9, "baseline-linear": 0.8, "baseline-constant": 0.5}
TASKS = {  # the demo suite's tasks (their specs are loaded too), with their metric directions:
    # every setting suites/demo.yaml lists, or the suite is provisional and ranks nobody
    "bank-customer-churn-ict-u-ai": "maximize",
    "foot-traffic-wuerzburg-retail-forecasting-2-0": "minimize",
    "playground-series-s5e10": "minimize",
    "playground-series-s6e1": "minimize",
}
BUDGETS = (240, 600, 1200)
ATTEMPTS = 6  # more than the 5 counted successes, so every setting is covered
NAV_LINKS = 'a[data-testid="stSidebarNavLink"], a[data-testid="stTopNavLink"]'
EXCEPTION = '[data-testid="stException"]'
TABLES = '[data-testid="stDataFrame"]'
CHARTS = '[data-testid="stVegaLiteChart"]'
PAGE_CHARTS = {"cost": 2, "reliability": 3, "settings": 2, "time_scaling": 2}  # at least, drawn
COST_AGENT = "baseline-gbm"  # the one demo agent whose attempts record tokens and cost
WIDTH = 1600  # the screen the main tables must fit without sideways scroll
SUITE_FILES = sorted(p.stem for p in (REPO_ROOT / "suites").glob("*.yaml"))
SNAKE_CASE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")  # an internal column name
# per table drawn (not inside a closed expander): its column headers, and whether it scrolls
# sideways (the data grid's scroller wider than its box, or the box past the viewport)
TABLE_REPORT = f"""() => [...document.querySelectorAll('{TABLES}')]
    .filter(el => !el.closest('details:not([open])'))
    .map(el => {{
        const scroller = el.querySelector('.dvn-scroller');
        return {{
            headers: [...el.querySelectorAll('[role=columnheader], th')]
                .map(h => h.textContent.trim()).filter(Boolean),
            scrollWidth: scroller ? scroller.scrollWidth : 0,
            clientWidth: scroller ? scroller.clientWidth : 0,
            right: el.getBoundingClientRect().right,
        }};
    }})"""
CHART_TEXTS = f"""() => [...document.querySelectorAll('{CHARTS}')]
    .map(chart => [...chart.querySelectorAll('svg text')].map(t => t.textContent))"""
# How the page's font draws a character on a canvas (as the data grid draws its cells): a glyph
# no installed font has is drawn as the same empty box as a private-use character
GLYPH = """([font, ch]) => {
    const canvas = document.createElement('canvas');
    canvas.width = 48; canvas.height = 48;
    const ctx = canvas.getContext('2d');
    ctx.font = font; ctx.fillStyle = 'black'; ctx.fillText(ch, 8, 36);
    return canvas.toDataURL();
}"""
BADGE_GLYPHS = ("✓", "✗", "⚠", "↔", "⊘")  # the badges (⧉ and ⛔ were empty boxes: no emoji font)


def demo_records(attempts: int = ATTEMPTS, seed: int = 0) -> Iterator:
    """Records for the demo agents on the repo's tasks; a few timeouts, >= 5 successes each."""
    rng = random.Random(seed)
    for agent, quality in AGENTS.items():
        for task, direction in TASKS.items():
            for budget in BUDGETS:
                for attempt in range(attempts):
                    failed = attempt == attempts - 1 and budget == BUDGETS[0]
                    value = quality + budget / 40_000 + rng.gauss(0, 0.01)
                    score = value if direction == "maximize" else 1.5 - value
                    cost = {}
                    if agent == COST_AGENT:
                        tokens = budget * 50 + attempt
                        cost = dict(
                            tokens_in=tokens, tokens_out=tokens // 10, cost_usd=tokens / 1e6
                        )
                    yield make_record(
                        agent,
                        task,
                        budget,
                        minute=attempt,
                        status="timeout" if failed else "success",
                        score=score,
                        direction=direction,
                        **cost,
                    )


# Text an agent controls (its submission's header, its output, its model's replies), with what
# Markdown would render: an image the browser would fetch at once, a javascript: link, raw HTML
# and a heading. The run explorer must show it as text.
PIXEL = "http://127.0.0.1:9/pixel.png"
HOSTILE = (
    f"![x]({PIXEL}) [click](javascript:alert(1)) <img src=x onerror=alert(1)>\n"
    "# Heading from the agent\n"
)
HOSTILE_RUN = "baseline-constant__bank-customer-churn-ict-u-ai__240s__standard__a99"


def hostile_attempt() -> tuple:
    """The newest attempt (so the run explorer opens it): an invalid submission whose messages,
    logs and transcript carry HOSTILE; returns the record and the files of its run folder."""
    record = make_record(
        "baseline-constant",
        "bank-customer-churn-ict-u-ai",
        240,
        minute=99,
        status="invalid_submission",
        score=None,
        run_id=HOSTILE_RUN,
        validation_code="wrong_columns",
        validation_message=f"the header is {HOSTILE!r}",
        error_message=HOSTILE,
        egress_denied_hosts={f"{HOSTILE}:443": 1},
        stdout_path="stdout.log",
        transcript_path="transcript.jsonl",
    )
    events = [
        {"event": "start", "t": 0.0, "model": HOSTILE, "base_url": PIXEL, "budget_seconds": 240,
         "system": HOSTILE, "instructions": HOSTILE},
        {"event": "response", "t": 1.0, "seconds": 0.5, "usage": {"note": HOSTILE},
         "message": {"role": "assistant", "content": HOSTILE}},
        {"event": "tool", "t": 1.5, "name": HOSTILE, "seconds": 0.1,
         "arguments": {"command": HOSTILE}, "result": HOSTILE},
        {"event": "end", "t": 2.0, "reason": HOSTILE, "provider_error": HOSTILE},
    ]  # fmt: skip
    transcript = "\n".join(json.dumps(e) for e in events) + "\n"
    return record, {"stdout.log": HOSTILE, "transcript.jsonl": transcript}


def build_snapshot(root: Path, records, files: dict[str, dict[str, str]] | None = None) -> Path:
    """records → run folders of the demo suite (plus ``files``: run_id → name → text) →
    warehouse (with the repo's specs) → dbt marts → snapshot."""
    runs = root / "runs"
    for record in records:
        run_dir = runs / "demo" / record.run_id  # suites/demo.yaml's runs_subdir
        run_dir.mkdir(parents=True)
        write_record(run_dir, record)
        for name, text in (files or {}).get(record.run_id, {}).items():
            (run_dir / name).write_text(text, encoding="utf-8")
    warehouse = root / "warehouse.duckdb"
    con = connect(warehouse)
    try:
        load_specs(con, make_paths(root))
        report = load_runs(con, runs)
        assert not report.rejected, report.rejected
    finally:
        con.close()
    build_marts(warehouse, artifacts_dir=root / "dbt", exclude=SCENARIO_EXCLUDE, run=run_in_process)
    snapshot = root / "snapshot.duckdb"
    counts = publish_snapshot(warehouse, snapshot)
    assert counts.get("marts.leaderboard", 0) > 0, counts
    return snapshot


def require_chromium() -> None:
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} is missing: `make test` installs it (make browser-deps, as root on "
            "Debian), or run `sudo apt-get install chromium`"
        )


def agents_drawn(page) -> tuple[int, int]:
    """Wait until each agent's name is on the page (st.dataframe draws on a canvas; its hidden
    accessibility table holds the text, rendered asynchronously), and the page is drawn; the
    (tables, charts) drawn."""
    for agent in AGENTS:
        page.get_by_text(agent, exact=True).first.wait_for(
            state="attached", timeout=RENDER_TIMEOUT_MS
        )
    return wait_until_drawn(page)


def page_drawn(page, charts: int) -> tuple[int, int]:
    """Wait until a page shows a table or an exception, then until it is drawn with ``charts``;
    the (tables, charts) drawn."""
    page.locator(f"{TABLES}, {EXCEPTION}").first.wait_for(timeout=RENDER_TIMEOUT_MS)
    return wait_until_drawn(page, charts=charts)


def run_explorer_drawn(page) -> tuple[int, int]:
    """Wait until the run explorer shows the hostile run's validation message with its code
    block, and is drawn. The block's code (the highlighter) is fetched on first use, so a
    loaded host can show the message well before the block, or the error that replaces it."""
    page.get_by_text("Validation failed").first.wait_for(timeout=RENDER_TIMEOUT_MS)
    page.wait_for_function(
        f"""() => document.querySelector('[data-testid="stMain"] [data-testid="stCode"]')
            || {MODULE_LOAD_FAILED_JS}""",
        timeout=RENDER_TIMEOUT_MS,
    )
    return wait_until_drawn(page)


def wait_until_drawn(page, timeout_ms: int = RENDER_TIMEOUT_MS, charts: int = 0) -> tuple[int, int]:
    """Wait until the script run has finished and every table and chart on the page is drawn
    (a data grid's canvas, a Vega-Lite chart's canvas or svg.marks; not those in a closed
    expander), and at least ``charts`` charts are on it; returns (tables, charts) on the page.

    The charts' number is waited for, not read once: Streamlit mounts a chart's element only once
    its code-split Vega component has loaded, so on a loaded host a finished run can show its
    tables before its charts exist. A page that never draws them is left to the caller's count.
    A component whose code failed to load is never drawn: the wait ends there too, for
    ``open_page`` to load the page again."""
    wait_until_idle(page, timeout_ms)
    page.wait_for_function(
        f"""() => {{
            if ({MODULE_LOAD_FAILED_JS}) return true;
            // a table inside a closed expander is not drawn until it is opened
            const drawn = (selector, inner) => [...document.querySelectorAll(selector)]
                .filter(el => !el.closest('details:not([open])'))
                .every(el => el.querySelector(inner) && el.getBoundingClientRect().height > 0);
            return drawn('{TABLES}', 'canvas') && drawn('{CHARTS}', 'canvas, svg.marks');
        }}""",
        timeout=timeout_ms,
    )
    if charts:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(
                f"""() => {MODULE_LOAD_FAILED_JS}
                    || [...document.querySelectorAll('{CHARTS}')]
                    .filter(el => el.querySelector('canvas, svg.marks')).length >= {charts}""",
                timeout=timeout_ms,
            )
    return page.locator(TABLES).count(), page.locator(CHARTS).count()


def screenshot_and_check(page, name: str) -> None:
    """The whole page at WIDTH px, screenshotted and checked (check_readable): the viewport grown
    to the main area's height (Streamlit scrolls inside it, and draws elements outside the
    viewport as skeletons) until every table has its headers, then back."""
    height = page.evaluate(
        """() => document.querySelector('[data-testid="stMain"]').scrollHeight"""
    )
    page.set_viewport_size({"width": WIDTH, "height": max(1200, min(int(height) + 100, 8000))})
    wait_until_drawn(page)
    page.wait_for_function(
        f"""() => [...document.querySelectorAll('{TABLES}')]
            .filter(el => !el.closest('details:not([open])'))
            .every(el => el.querySelector('[role=columnheader], th'))""",
        timeout=RENDER_TIMEOUT_MS,
    )
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    try:
        check_readable(page, name)
    finally:
        page.set_viewport_size({"width": WIDTH, "height": 1200})


def check_readable(page, slug: str) -> None:
    """What a reader sees at WIDTH px: the suite picker above the title with every suite file,
    tables that fit (no sideways scroll) with human headers, and the charts' labels."""
    main = page.locator('[data-testid="stMain"]')
    picker = main.locator('[data-testid="stSelectbox"]').filter(has_text="Suite").first
    title = main.locator("h1").first
    assert picker.bounding_box()["y"] < title.bounding_box()["y"], f"{slug}: picker not on top"
    picker.click()  # every suite file is a choice, those without runs marked so
    options = page.locator('[role="option"]')
    options.first.wait_for(timeout=RENDER_TIMEOUT_MS)
    listed = [options.nth(i).inner_text() for i in range(options.count())]
    page.keyboard.press("Escape")
    assert [item.split(" · ")[0] for item in listed] == SUITE_FILES, listed
    assert all(item.endswith("(no runs yet)") for item in listed if not item.startswith("demo")), (
        listed
    )
    tables = page.evaluate(TABLE_REPORT)
    assert tables, slug
    for table in tables:
        headers = table["headers"]
        assert headers, (slug, table)
        assert not [h for h in headers if SNAKE_CASE.match(h) or h == "suite_id"], (slug, headers)
        assert table["scrollWidth"] <= table["clientWidth"] + 1, (slug, "scrolls sideways", table)
        assert table["right"] <= WIDTH, (slug, "wider than the screen", table)
    texts = page.evaluate(CHART_TEXTS)
    if slug == "run_explorer":
        assert tables[0]["headers"][:5] == ["Status", "Score", "Agent", "Task", "Budget"], tables
        assert tables[0]["headers"][-1] == "Run id", tables
        record = next(t for t in tables if t["headers"] == ["Field", "Value"])
        assert record, tables
    if slug == "rank_stability":
        spread, heatmap = texts[0], texts[1]
        assert {"1", "2", "3"} <= set(spread) and not {"0", "0.0", "4"} & set(spread), spread
        assert set(TASKS) <= set(heatmap), heatmap  # full task labels, none cut with "…"
        assert not [t for t in heatmap if t.endswith("…")], heatmap
    if slug == "time_scaling":
        curve, grid = texts[0], texts[1]
        ticks = [t.replace(",", "") for t in curve if t.replace(",", "").isdigit()]
        assert {str(b) for b in BUDGETS} <= set(ticks), curve
        assert not {"100", "10000", "2000", "5000"} & set(ticks), curve  # fitted to the budgets
        assert set(TASKS) <= set(grid), grid


def page_slug(url: str, base: str) -> str:
    path = url.removeprefix(base).split("?")[0].strip("/")
    return re.sub(r"[^A-Za-z0-9_-]+", "_", path) or "home"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hostile, files = hostile_attempt()
    return build_snapshot(
        tmp_path_factory.mktemp("dashboard"), [*demo_records(), hostile], {HOSTILE_RUN: files}
    )


@pytest.fixture(scope="module")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture(scope="module")
def app_url(snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert APP.is_file(), f"{APP} is missing"
    log_path = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with streamlit_server(APP, snapshot, log_path) as base:
        yield base


def test_leaderboard_and_every_page_render(browser, app_url: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        tables, charts = open_page(page, app_url, ready=agents_drawn)
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
        assert tables >= 1, (tables, charts)  # the leaderboard; the rest behind expanders
        page.get_by_text("Chart: scores").click()  # its content runs once it is opened
        tables, charts = wait_until_drawn(page, charts=1)
        assert charts >= 1, (tables, charts)  # the bars
        screenshot_and_check(page, "home")
        # the duplicate-answer badge's glyph is one the browser's font draws (⧉ was an empty box)
        font = page.evaluate("() => getComputedStyle(document.body).fontFamily")
        missing = page.evaluate(GLYPH, [f"20px {font}", "\U0010fffd"])
        for glyph in BADGE_GLYPHS:
            assert page.evaluate(GLYPH, [f"20px {font}", glyph]) != missing, glyph
        assert "↔ attempts whose answer another agent also submitted" in page.inner_text("body")

        view_more = page.locator('[data-testid="stSidebarNavViewButton"]')
        if view_more.count() and "more" in view_more.first.inner_text().lower():
            view_more.first.click()
        links = page.locator(NAV_LINKS)
        urls = list(dict.fromkeys(links.nth(i).get_attribute("href") for i in range(links.count())))
        page_files = [p for p in sorted(PAGES_DIR.glob("*.py")) if not p.name.startswith("_")]
        if len(page_files) > 1:
            assert len(urls) >= len(page_files), (
                f"{len(page_files)} page files in {PAGES_DIR}, {len(urls)} navigation links: {urls}"
            )
        assert any("cost" in url for url in urls), urls
        visited = {}
        for url in urls:
            absolute = url if url.startswith("http") else f"{app_url}/{url.lstrip('/')}"
            slug = page_slug(absolute, app_url)
            wanted = PAGE_CHARTS.get(slug, 0)
            drawn = open_page(page, absolute, ready=functools.partial(page_drawn, charts=wanted))
            errors = page.locator(EXCEPTION)
            if errors.count():  # what went wrong, for the artifacts
                page.screenshot(path=str(ARTIFACTS / f"{slug}.png"), full_page=True)
            assert errors.count() == 0, f"{absolute}: {errors.first.inner_text()}"
            assert drawn[0] >= 1, f"{absolute}: no table drawn"
            screenshot_and_check(page, slug)
            visited[slug] = drawn
        assert len(visited) == len(urls)
        # pages with charts: every one of them drawn (tables, charts)
        charts = {slug: n for slug, (_, n) in visited.items()}
        assert all(charts[slug] >= n for slug, n in PAGE_CHARTS.items()), visited
    finally:
        page.close()


def test_run_explorer_shows_agent_text_as_text(browser, app_url: str) -> None:
    """No <img>, <a> or heading made from an agent's text reaches the DOM, nothing is fetched
    from the URL in it, and the text itself is there, verbatim."""
    # Streamlit draws elements outside the viewport as skeletons: a viewport taller than the
    # page keeps every element in the DOM while it is checked
    page = browser.new_page(viewport={"width": 1600, "height": 4000})
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    try:
        open_page(page, f"{app_url}/run_explorer", ready=run_explorer_drawn)
        page.get_by_role("tab", name="Transcript").click()
        page.get_by_text("System prompt and task").click()
        wait_until_idle(page)
        page.wait_for_function(
            """() => !document.querySelector('[data-testid="stSkeleton"]')""",
            timeout=RENDER_TIMEOUT_MS,
        )
        assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "run_explorer_agent_text.png"), full_page=True)
        assert page.get_by_text(MODULE_LOAD_ERROR).count() == 0  # every code block drawn

        main = page.locator('[data-testid="stMain"]')
        assert main.locator(f'img[src="{PIXEL}"], img[src="x"], img[onerror]').count() == 0
        assert page.locator('a[href^="javascript:"]').count() == 0
        assert main.locator("a", has_text="click").count() == 0
        assert (
            main.locator("h1, h2, h3, h4, h5, h6", has_text="Heading from the agent").count() == 0
        )
        assert not [url for url in fetched if "127.0.0.1:9" in url], fetched
        shown = main.inner_text()
        assert f"![x]({PIXEL}) [click](javascript:alert(1)) <img src=x onerror=alert(1)>" in shown
        assert "# Heading from the agent" in shown and HOSTILE_RUN in shown
        # validation and error message; transcript: system, instructions, tool call and result,
        # provider error (each a code block); the model's reply as plain text
        blocks = main.locator('[data-testid="stCode"]').filter(has_text="onerror=alert(1)")
        assert blocks.count() >= 7, blocks.count()
        assert main.locator('[data-testid="stText"]').filter(has_text="onerror=alert(1)").count()
        # the stdout tab: the log, verbatim
        page.get_by_role("tab", name="stdout").click()
        wait_until_idle(page)
        log = main.locator('[role="tabpanel"]:visible [data-testid="stCode"]')
        assert "[click](javascript:alert(1))" in log.first.inner_text()
        assert (
            main.locator(f'img[src="{PIXEL}"], img[src="x"], a[href^="javascript:"]').count() == 0
        )
    finally:
        page.close()


# Here, not in tests/tools/: it needs this module's server, snapshot and browser.
@pytest.mark.parametrize("refusals", [1, 2])
def test_a_page_whose_code_could_not_be_fetched_is_loaded_once_more(
    browser, app_url: str, refusals: int
) -> None:
    """tools.streamlit_server.open_page: the run explorer's code highlighter, refused once by a
    reset connection, leaves a warning naming the request and a page drawn whole; refused on the
    reload too, an error naming it."""
    page = browser.new_page(viewport={"width": 1600, "height": 4000})
    refused: list[str] = []

    def refuse_first(route) -> None:
        if len(refused) < refusals:
            refused.append(route.request.url)
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/static/js/StreamlitSyntaxHighlighter*.js", refuse_first)
    try:
        with pytest.warns(UserWarning, match="could not load some of its code") as warned:
            if refusals == 1:
                open_page(page, f"{app_url}/run_explorer", ready=run_explorer_drawn)
            else:
                with pytest.raises(StreamlitServerError, match="twice") as error:
                    open_page(page, f"{app_url}/run_explorer", ready=run_explorer_drawn)
                assert "StreamlitSyntaxHighlighter" in str(error.value), error.value
        assert len(refused) == refusals and len(warned) == 1
        assert "StreamlitSyntaxHighlighter" in str(warned[0].message), warned[0].message
        assert "ERR_CONNECTION_RESET" in str(warned[0].message), warned[0].message
        if refusals == 1:
            assert page.get_by_text(MODULE_LOAD_ERROR).count() == 0
            assert page.locator('[data-testid="stMain"] [data-testid="stCode"]').count() > 0
    finally:
        page.close()


def test_an_open_page_offers_and_then_shows_a_newly_published_snapshot(
    browser, snapshot: Path, app_snapshot: Path, tmp_path: Path
) -> None:
    """The dashboard is opened on the demo baselines' snapshot; then the pipeline publishes over
    a warehouse with other data (app_snapshot's: agents alpha, beta, gamma and a suite "other").
    Without a click, the open page says a newer snapshot is there and offers it; its button
    reruns the page, which then shows the new agents; the same Streamlit process throughout."""
    live = tmp_path / "live.snapshot.duckdb"
    publish_snapshot(snapshot.with_name("warehouse.duckdb"), live)
    with streamlit_server(APP, live, tmp_path / "streamlit.log") as base:
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        try:
            open_page(page, base, ready=agents_drawn)
            notice = page.get_by_text("A newer snapshot was published")
            assert notice.count() == 0
            assert page.get_by_text("alpha", exact=True).count() == 0

            publish_snapshot(app_snapshot.with_name("warehouse.duckdb"), live)
            notice.wait_for(timeout=RENDER_TIMEOUT_MS)  # the page looks every few seconds
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "newer_snapshot_notice.png"))
            # offered, not forced: the page still shows what it was drawn from
            assert page.get_by_text("baseline-gbm", exact=True).count() >= 1
            assert page.get_by_text("alpha", exact=True).count() == 0

            page.get_by_role("button", name="Show the new snapshot").click()
            page.get_by_text("alpha", exact=True).first.wait_for(
                state="attached", timeout=RENDER_TIMEOUT_MS
            )
            wait_until_drawn(page)
            assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
            assert page.get_by_text("beta", exact=True).count() >= 1
            assert page.get_by_text("baseline-gbm", exact=True).count() == 0
            assert notice.count() == 0
            page.screenshot(path=str(ARTIFACTS / "newer_snapshot_shown.png"), full_page=True)
        finally:
            page.close()
