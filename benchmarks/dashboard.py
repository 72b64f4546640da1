"""Time to first render of the dashboard's leaderboard and run explorer over N synthetic attempts.

Generates N attempts in raw.runs (the same generator as benchmarks/dbt_build.py), builds the
marts, publishes the snapshot, starts ``streamlit run app/streamlit_app.py`` on a free loopback
port and opens the leaderboard in headless Debian chromium (``/usr/bin/chromium``, through
Playwright; Playwright's own browser download is never used). Time to first render: from
``page.goto`` until the leaderboard table holds the top agent's name and the script run has
finished and the table is drawn. "cold" is the first page load after the server started (the
server's start-up hook, app/streamlit_app.py, has imported the heavy modules and cached the
leaderboard's queries; nothing else is warm), "warm" the median of later loads in fresh browser
pages. Target: <= 2 s.

Run explorer (after the leaderboard loads): from ``page.goto`` of the run explorer until its
attempts table is drawn (the data grid's canvas) and the newest attempt's record is shown,
median of a few loads in fresh pages; then opening another attempt: from choosing it in the
"Open an attempt" box until its run id heads the record. Target: <= 3 s.

    uv run python benchmarks/dashboard.py              # N = 100,000
    uv run python benchmarks/dashboard.py -n 10000 -n 1000000
"""

from __future__ import annotations

import argparse
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
from playwright.sync_api import sync_playwright

from tests.support.streamlit_server import (
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
EXPLORER_LOADS = 3
TIMEOUT_MS = 120_000
TABLE_DRAWN = """() => {
    const tables = [...document.querySelectorAll('[data-testid="stDataFrame"]')]
        .filter(t => !t.closest('details:not([open])'));  // a closed expander's: not drawn
    return tables.length > 0 && tables.every(t => t.querySelector('canvas'));
}"""


def first_render(browser, url: str) -> float:
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        started = time.perf_counter()
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text(TOP_AGENT, exact=True).first.wait_for(state="attached", timeout=TIMEOUT_MS)
        page.wait_for_function(TABLE_DRAWN, timeout=TIMEOUT_MS)
        wait_until_idle(page, TIMEOUT_MS)
        seconds = time.perf_counter() - started
        _raise_on_exception(page, "leaderboard")
        return seconds
    finally:
        page.close()


def _raise_on_exception(page, what: str) -> None:
    errors = page.locator('[data-testid="stException"]')
    if errors.count():
        raise RuntimeError(f"the {what} raised: {errors.first.inner_text()}")


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
        _raise_on_exception(page, "run explorer")
        box = page.get_by_label("Open an attempt")
        started = time.perf_counter()
        box.click()
        box.fill(newest[1])
        page.keyboard.press("Enter")
        page.get_by_role("heading", name=newest[1]).wait_for(timeout=TIMEOUT_MS)
        wait_until_idle(page, TIMEOUT_MS)
        opened = time.perf_counter() - started
        _raise_on_exception(page, "run explorer")
        return render, opened
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, action="append", help="attempts (repeatable)")
    args = parser.parse_args()
    sizes = args.runs or [100_000]
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
                with streamlit_server(APP, snapshot, root / "streamlit.log") as url:
                    cold = first_render(browser, url)
                    warm = [first_render(browser, url) for _ in range(WARM_LOADS)]
                    explorer = [run_explorer(browser, url, newest) for _ in range(EXPLORER_LOADS)]
                verdict = "ok" if cold <= 2.0 else "over the 2 s target"
                print(
                    f"N={n:>9,}  leaderboard first render: cold {cold:5.2f} s, "
                    f"warm median {statistics.median(warm):5.2f} s ({verdict})"
                )
                render = [r for r, _ in explorer]
                opened = [o for _, o in explorer]
                verdict = "ok" if max(render) <= 3.0 and max(opened) <= 3.0 else "over 3 s"
                print(
                    f"N={n:>9,}  run explorer: table drawn first {render[0]:5.2f} s, "
                    f"median {statistics.median(render):5.2f} s; open an attempt median "
                    f"{statistics.median(opened):5.2f} s, max {max(opened):5.2f} s ({verdict})"
                )
        finally:
            browser.close()


if __name__ == "__main__":
    main()
