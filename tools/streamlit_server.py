"""The real dashboard for browser tests and benchmarks: ``streamlit run app/streamlit_app.py`` on a
free loopback port, and Debian's chromium (driven through Playwright) waiting for it to render."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from runner.config import REPO_ROOT
from tools.servers import free_port, stop

if TYPE_CHECKING:  # Playwright is imported by the browser's users, not by starting a server
    from playwright.sync_api import Page, Request

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
APP = REPO_ROOT / "app" / "streamlit_app.py"
STARTUP_TIMEOUT = 60.0
RENDER_TIMEOUT_MS = 60_000
BIN = Path(sys.executable).parent


class StreamlitServerError(AssertionError):
    """The server exited or never became healthy (the message holds its log). An AssertionError,
    so a test that starts it fails rather than errors, without this module importing pytest (the
    benchmarks use it too)."""


@contextlib.contextmanager
def streamlit_server(app: Path, snapshot: Path, log_path: Path) -> Iterator[str]:
    """``streamlit run app`` on a free loopback port; yields its base URL once healthy."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TMLBENCH_SNAPSHOT": str(snapshot), "PYTHONUNBUFFERED": "1"}
    with log_path.open("w+b") as log:
        proc = subprocess.Popen(
            [
                str(BIN / "streamlit"),
                "run",
                str(app),
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(port),
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, terminated as a whole
        )
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise StreamlitServerError(
                        f"streamlit exited with {proc.returncode}:\n{log.read().decode()}"
                    )
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as response:
                        if response.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    log.seek(0)
                    raise StreamlitServerError(
                        f"no /_stcore/health after {STARTUP_TIMEOUT}s:\n{log.read().decode()}"
                    )
                time.sleep(0.25)
            yield base
        finally:
            stop(proc)


def wait_until_idle(page: Page, timeout_ms: int = RENDER_TIMEOUT_MS) -> None:
    """Wait until the app has rendered and its script run has finished."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=timeout_ms)
    page.wait_for_function(
        """() => {
            const app = document.querySelector('[data-testid="stApp"]');
            return app && app.getAttribute('data-test-script-state') === 'notRunning';
        }""",
        timeout=timeout_ms,
    )


# What the frontend draws in place of an element whose code it could not fetch. It loads some
# components' code on first use (the code highlighter, the download button, charts), and a
# failed request leaves every such element an error alert until the page is loaded again: the
# browser keeps the failed import for the page's life.
MODULE_LOAD_ERROR = "Failed to fetch dynamically imported module"
# The same, as a JavaScript expression: the browser waits stop at it (the element never draws).
MODULE_LOAD_FAILED_JS = f"document.body.innerText.includes('{MODULE_LOAD_ERROR}')"


def open_page(
    page: Page, url: str, ready: Callable[[Page], T], timeout_ms: int = RENDER_TIMEOUT_MS
) -> T:
    """Go to ``url``, run ``ready(page)`` (the caller's wait for what it will check), wait until
    no request is in flight, and return what ``ready`` returned. If the browser could not fetch
    a component's code, load the page once more, with a warning that names the failed requests
    and their network error (the run's warnings summary shows it); a second failure raises
    StreamlitServerError. Seen once, in CI under a full `make test` (2026-12-07): every code
    block of the run explorer drew this error instead of the agent's text, while the server was
    up; its cause was not found."""
    origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(url))
    failed: list[str] = []

    def record(request: Request) -> None:
        if request.url.startswith(origin):  # not the icon font from the internet
            failed.append(f"{request.url}: {request.failure}")

    page.on("requestfailed", record)
    try:
        page.goto(url, wait_until="domcontentloaded")
        for again in (False, True):
            if again:
                warnings.warn(
                    f"{url}: the page could not load some of its code, loaded it again; "
                    f"failed requests: {failed}",
                    stacklevel=2,
                )
                page.reload(wait_until="domcontentloaded")
            drawn = ready(page)
            page.wait_for_load_state("networkidle", timeout=timeout_ms)
            if page.get_by_text(MODULE_LOAD_ERROR).count() == 0:
                return drawn
        raise StreamlitServerError(
            f"{url}: twice, the page could not load some of its code; failed requests: {failed}"
        )
    finally:
        page.remove_listener("requestfailed", record)
