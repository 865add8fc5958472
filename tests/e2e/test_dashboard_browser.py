"""The dashboard served by `streamlit run` on a seeded farm, in headless Chromium: every
page renders (screenshot saved) and none shows an exception."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from devicefarm.demo_lab import seed
from tests.conftest import require
from tests.support.farm import free_port, sqlite_engine

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGES = (
    "fleet",
    "campaigns",
    "compare",
    "delegates",
    "accuracy",
    "op_coverage",
    "compatibility",
    "history",
)
#: Words a page shows only when something broke.
BROKEN = ("Traceback", "Error:", "Exception", "StreamlitAPIException")
#: Column names that must not reach a reader as axis or legend titles.
RAW_NAMES = ("avg_ms", "median_ms", "peak_mb", "speedup", "config_fingerprint", "init_cold_ms")
#: Words a page must show: units, zones and limits as the farm has them.
PAGE_SAYS = {
    "campaigns": ("128MB per file",),  # the farm's model cap, not Streamlit's 200 MB
    "compare": ("average latency (ms)", "speed-up over the CPU (x)", "peak memory (MB)"),
    "history": ("measured (UTC)", "median latency (ms)"),
}
SERVE_TIMEOUT_S = 60
PAGE_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require(os.path.exists(CHROMIUM), "chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require(False, "the playwright package")
    folder = Path(tmp_path_factory.mktemp("browser"))
    seed(sqlite_engine(folder))
    port = free_port()
    # as a lab serves it (no tokens file, no password: no login)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
    env |= {"DEVICEFARM_HOME": str(folder), "PYTHONPATH": str(REPO)}
    log = (folder / "streamlit.log").open("w")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "devicefarm", "dashboard"),
            *("--db", f"sqlite:///{folder / 'farm.db'}", "--port", str(port)),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=REPO,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while True:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not serve: {(folder / 'streamlit.log').read_text()}")
            time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def browser(server: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.mark.parametrize("name", PAGES)
def test_page_renders_without_exception(
    server: str, browser, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    shots = Path(os.environ.get("DEVICEFARM_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{server}/{name}", timeout=PAGE_TIMEOUT_MS)
        page.wait_for_selector("h1", timeout=PAGE_TIMEOUT_MS)
        # Streamlit marks the app while its script runs; wait until it is done
        page.wait_for_selector(
            '[data-testid="stApp"][data-test-script-state="notRunning"]',
            timeout=PAGE_TIMEOUT_MS,
        )
        page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stSkeleton\"]')",
            timeout=PAGE_TIMEOUT_MS,
        )
        page.wait_for_timeout(500)
        page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
        body = page.inner_text("body")
        assert not [w for w in BROKEN if w in body], body[:2000]
        assert page.locator("h1").first.inner_text().strip()
        (shots / f"{name}.txt").write_text(body)
        # reads right: no "None", no raw column names on axes, no Deploy button
        assert not re.search(r"\bNone\b", body), body[:2000]
        assert not [w for w in RAW_NAMES if re.search(rf"\b{w}\b", body)], body[:2000]
        assert page.get_by_role("button", name="Deploy").count() == 0
        for words in PAGE_SAYS.get(name, ()):
            assert words in body, body[:3000]
    finally:
        page.close()
