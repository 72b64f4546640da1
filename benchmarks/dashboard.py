"""Time to first render of the dashboard's leaderboard and run explorer over N synthetic attempts,
next to the floor: a one-table Streamlit page served and loaded the same way.

Generates N attempts in raw.runs (the same generator as benchmarks/dbt_build.py), builds the
marts, publishes the snapshot, starts ``streamlit run app/streamlit_app.py`` on a free loopback
port and opens its pages in headless Debian chromium (``/usr/bin/chromium``, through Playwright;
Playwright's own browser download is never used), each load in a fresh browser page (a new
context: nothing cached in the browser).

Leaderboard: from ``page.goto`` until the leaderboard table holds the top agent's name, every
table on the page (not in a closed expander) is drawn (the data grid's canvas) and the script run
has finished. "cold" is the first page load after the server started (its start-up hook,
app/streamlit_app.py, has imported the heavy modules and cached the default pages' queries;
nothing else is warm), "warm" the median of later loads.

Run explorer (after the leaderboard's loads): from ``page.goto`` of the run explorer until its
tables are drawn and the newest attempt's record is shown; "cold" its first load, "warm" the
median of later loads. Opening another attempt: from choosing it in the "Open an attempt" box
until its run id heads the record and the script run has finished (median and max over every
load).

Floor: first, a page with one ``st.dataframe`` of 20 rows (no navigation, no sidebar), served by
a server of its own with the dashboard's server options (app/.streamlit/config.toml) and timed
with the same criterion: what any Streamlit page costs on this machine, whatever it shows. It is
also timed for a returning viewer (new tabs of one browser context that loaded it once, so its
JavaScript is cached): the part of the floor that no server can take away.

Targets: each page <= 1.5 s cold and <= 1 s warm; opening an attempt <= 3 s. The load averages
of the machine are printed with each measurement: on a shared machine, compare runs at similar
load, and the pages with the floor of the same run.

    uv run python benchmarks/dashboard.py              # N = 100,000
    uv run python benchmarks/dashboard.py -n 10000 -n 1000000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import duckdb
from dbt_build import generate
from machine import describe_machine
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import sync_playwright

from tools.streamlit_server import (
    APP,
    CHROMIUM,
    CHROMIUM_ARGS,
    streamlit_server,
    wait_until_idle,
)
from warehouse.marts import build_marts
from warehouse.snapshot import publish_snapshot

TOP_AGENT = "agent-19"  # the generator's best agent
WARM_LOADS = 5
TIMEOUT_MS = 120_000
COLD_TARGET, WARM_TARGET = 1.5, 1.0  # seconds, each page
OPEN_TARGET = 3.0  # seconds, opening another attempt
TABLE_DRAWN = """() => {
    const tables = [...document.querySelectorAll('[data-testid="stDataFrame"]')]
        .filter(t => !t.closest('details:not([open])'));  // a closed expander's: not drawn
    return tables.length > 0 && tables.every(t => t.querySelector('canvas'));
}"""
FLOOR_PAGE = f"""
import pandas as pd
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
agents = [f"agent-{{19 - i:02d}}" for i in range(20)]  # {TOP_AGENT} first, like the leaderboard
scores = [1 - i / 20 for i in range(20)]
frame = pd.DataFrame({{"rank": range(1, 21), "agent_id": agents, "score": scores}})
st.dataframe(frame, hide_index=True)
"""


def first_render(browser, url: str) -> float:
    """Seconds to draw ``url`` in a fresh browser context (nothing cached in the browser)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        return _timed_render(page, url)
    finally:
        page.close()


def _timed_render(page, url: str) -> float:
    started = time.perf_counter()
    page.goto(url, wait_until="domcontentloaded")
    try:
        page.get_by_text(TOP_AGENT, exact=True).first.wait_for(state="attached", timeout=TIMEOUT_MS)
        page.wait_for_function(TABLE_DRAWN, timeout=TIMEOUT_MS)
        wait_until_idle(page, TIMEOUT_MS)
    except PlaywrightTimeoutError:
        _raise_on_exception(page, url)
        shown = page.locator("body").inner_text()[:1000]
        raise RuntimeError(f"{url}: not drawn in {TIMEOUT_MS} ms; it shows:\n{shown}") from None
    seconds = time.perf_counter() - started
    _raise_on_exception(page, url)
    return seconds


def cached_renders(browser, url: str, loads: int) -> list[float]:
    """Seconds to draw ``url`` in new tabs of one browser context that has loaded it once: a
    returning viewer, whose browser has Streamlit's JavaScript chunks cached."""
    context = browser.new_context(viewport={"width": 1600, "height": 1200})
    try:
        first = context.new_page()
        _timed_render(first, url)
        first.close()
        seconds = []
        for _ in range(loads):
            page = context.new_page()
            seconds.append(_timed_render(page, url))
            page.close()
        return seconds
    finally:
        context.close()


def _raise_on_exception(page, what: str) -> None:
    errors = page.locator('[data-testid="stException"]')
    if errors.count():
        raise RuntimeError(f"{what} raised: {errors.first.inner_text()}")


def _newest_runs(snapshot: Path, n: int = 2) -> list[str]:
    with duckdb.connect(str(snapshot), read_only=True) as con:
        rows = con.execute(
            "select run_id from raw.runs order by created_at desc, run_id limit ?", [n]
        ).fetchall()
    return [r[0] for r in rows]


def run_explorer(browser, url: str, newest: list[str]) -> tuple[float, float]:
    """Seconds until the run explorer's table and newest record are drawn; seconds to open the
    second-newest attempt from the "Open an attempt" box."""
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        started = time.perf_counter()
        page.goto(f"{url}/run_explorer", wait_until="domcontentloaded")
        page.get_by_role("heading", name=newest[0]).wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(TABLE_DRAWN, timeout=TIMEOUT_MS)
        wait_until_idle(page, TIMEOUT_MS)
        render = time.perf_counter() - started
        _raise_on_exception(page, "the run explorer")
        box = page.get_by_label("Open an attempt")
        started = time.perf_counter()
        box.click()
        box.fill(newest[1])
        page.keyboard.press("Enter")
        page.get_by_role("heading", name=newest[1]).wait_for(timeout=TIMEOUT_MS)
        wait_until_idle(page, TIMEOUT_MS)
        opened = time.perf_counter() - started
        _raise_on_exception(page, "the run explorer")
        return render, opened
    finally:
        page.close()


def load_average() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def verdict(cold: float, warm: float) -> str:
    ok = cold <= COLD_TARGET and warm <= WARM_TARGET
    return "ok" if ok else f"over the target: <= {COLD_TARGET} s cold, <= {WARM_TARGET} s warm"


def measure_floor(browser, root: Path, snapshot: Path) -> tuple[float, list[float], list[float]]:
    floor = root / "floor"
    (floor / ".streamlit").mkdir(parents=True)
    shutil.copy(APP.parent / ".streamlit" / "config.toml", floor / ".streamlit" / "config.toml")
    script = floor / "floor.py"
    script.write_text(FLOOR_PAGE, encoding="utf-8")
    with streamlit_server(script, snapshot, root / "floor.log") as url:
        cold = first_render(browser, url)
        warm = [first_render(browser, url) for _ in range(WARM_LOADS)]
        cached = cached_renders(browser, url, WARM_LOADS)
    return cold, warm, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, action="append", help="attempts (repeatable)")
    args = parser.parse_args()
    sizes = args.runs or [100_000]
    sys.stdout.reconfigure(line_buffering=True)  # each result as it comes (minutes apart)
    if not CHROMIUM.is_file():
        sys.exit(f"{CHROMIUM} is missing: `make install` installs it (as root on Debian)")
    print(describe_machine())
    with (
        tempfile.TemporaryDirectory(prefix="tmlbench-dashboard-bench-") as tmp,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for n in sizes:
                root = Path(tmp) / f"n{n}"
                root.mkdir()
                warehouse = root / "warehouse.duckdb"
                generate(warehouse, n)
                build_marts(warehouse, artifacts_dir=root / "dbt")
                snapshot = root / "snapshot.duckdb"
                counts = publish_snapshot(warehouse, snapshot)
                if not counts.get("marts.leaderboard"):
                    print(f"N={n:>9,}  no agent is ranked (too few attempts per setting): skipped")
                    continue
                newest = _newest_runs(snapshot)
                print(f"N={n:>9,}  ({load_average()})")
                cold, warm, cached = measure_floor(browser, root, snapshot)
                print(
                    f"    floor (one 20-row st.dataframe): cold {cold:5.2f} s, warm median "
                    f"{statistics.median(warm):5.2f} s (min {min(warm):.2f}), browser cache warm "
                    f"median {statistics.median(cached):5.2f} s ({load_average()})"
                )
                with streamlit_server(APP, snapshot, root / "streamlit.log") as url:
                    cold = first_render(browser, url)
                    warm = [first_render(browser, url) for _ in range(WARM_LOADS)]
                    board = f"{load_average()}"
                    explorer = [run_explorer(browser, url, newest) for _ in range(1 + WARM_LOADS)]
                median = statistics.median(warm)
                print(
                    f"    leaderboard: cold {cold:5.2f} s, warm median {median:5.2f} s "
                    f"(min {min(warm):.2f}; {board}): {verdict(cold, median)}"
                )
                render = [r for r, _ in explorer]
                opened = [o for _, o in explorer]
                median = statistics.median(render[1:])
                print(
                    f"    run explorer: cold {render[0]:5.2f} s, warm median {median:5.2f} s "
                    f"(min {min(render[1:]):.2f}; {load_average()}): {verdict(render[0], median)}"
                )
                ok = "ok" if max(opened) <= OPEN_TARGET else f"over the {OPEN_TARGET} s target"
                print(
                    f"    open an attempt: median {statistics.median(opened):5.2f} s, "
                    f"max {max(opened):5.2f} s: {ok}"
                )
        finally:
            browser.close()


if __name__ == "__main__":
    main()
