"""The dashboard against hostile input (issue 16, point 12) and its logins (issue 17),
served by `devicefarm dashboard` and driven in headless Chromium: user strings render as
text (no link, no image fetched), wrong passwords are throttled per client, a login survives
a reload, every page has its URL, downloads and uploads need the login, the `read` role
submits nothing, `/_stcore/metrics` is not served, and SIGTERM on the command stops the
server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update
from test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, PAGE_TIMEOUT_MS, SERVE_TIMEOUT_S

from dashboard import queries
from devicefarm.demo_lab import seed
from farm_core import artifacts
from farm_core.accounts import Accounts, save_accounts
from farm_core.artifacts import NewArtifact
from farm_core.schema import Campaign, StoredModel
from tests.conftest import require
from tests.support.farm import free_port, sqlite_engine

pytestmark = pytest.mark.e2e

#: Where a rendered link or image would send the browser (nothing listens on port 9).
EVIL = "127.0.0.1:9"
CAMPAIGN = f"[click](http://{EVIL}/c) ![img](http://{EVIL}/c.png) :red[red] **bold** <b>b</b>"
MODEL = f"mobilenet [m](http://{EVIL}/m) ![mi](http://{EVIL}/m.png).tflite"
PASSWORD = "s3cret"
#: The back-off after the free attempts: long enough that no test outlives it by chance.
DELAY_S = 60
#: The debug artifact each campaign's first listed job holds.
LOGCAT = b"01-02 12:34:56.789  4242  4242 F libc    : Fatal signal 11 (SIGSEGV)\n"


def http_status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code


class Dashboard:
    """`devicefarm dashboard` on a seeded farm with hostile names, in its own session."""

    def __init__(self, folder: Path, **env: str):
        engine = sqlite_engine(folder)
        seed(engine)
        with engine.begin() as conn:
            conn.execute(update(Campaign).values(name=CAMPAIGN))
            conn.execute(
                update(StoredModel).where(StoredModel.name.like("mobilenet%")).values(name=MODEL)
            )
        for campaign in queries.campaigns(engine):  # the job the campaigns page shows first
            first = queries.campaign_jobs(engine, campaign["campaign"])[0]
            with engine.begin() as conn:
                artifacts.save(conn, first, 1, [NewArtifact("logcat", "logcat.txt", LOGCAT)])
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = folder / "dashboard.log"
        self.log = self.log_path.open("w")
        full_env = dict(os.environ) | env
        full_env.pop("DEVICEFARM_DASHBOARD_PASSWORD", None)
        full_env |= env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "devicefarm.cli", "dashboard"]
            + ["--db", f"sqlite:///{folder / 'farm.db'}", "--port", str(self.port)],
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while http_status_or_none(f"{self.url}/_stcore/health") != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the dashboard did not serve: {self.log_path.read_text()}")
            time.sleep(0.3)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()


def http_status_or_none(url: str) -> int | None:
    with contextlib.suppress(OSError):
        return http_status(url)
    return None


def _browser_ready() -> None:
    require(os.path.exists(CHROMIUM), "chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        require(False, "the playwright package")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    _browser_ready()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def open_dashboard(tmp_path_factory) -> Iterator[Dashboard]:
    _browser_ready()
    d = Dashboard(Path(tmp_path_factory.mktemp("open")))
    yield d
    d.stop()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[Dashboard]:
    _browser_ready()
    d = Dashboard(
        Path(tmp_path_factory.mktemp("guarded")),
        DEVICEFARM_DASHBOARD_PASSWORD=PASSWORD,
        DEVICEFARM_DASHBOARD_LOGIN_DELAY_S=str(DELAY_S),
    )
    yield d
    d.stop()


@pytest.fixture(scope="module")
def users(tmp_path_factory) -> Iterator[tuple[Dashboard, dict[str, str]]]:
    """A dashboard whose logins are the farm's tokens file: (dashboard, role -> token)."""
    _browser_ready()
    folder = Path(tmp_path_factory.mktemp("users"))
    accounts, reader = Accounts().add("rita", "read")
    accounts, submitter = accounts.add("sam", "submit")
    save_accounts(accounts, folder / "tokens.json")
    d = Dashboard(folder, DEVICEFARM_TOKENS=str(folder / "tokens.json"))
    yield d, {"read": reader, "submit": submitter}
    d.stop()


def settle(page) -> None:
    """Wait until Streamlit's script run is over."""
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=PAGE_TIMEOUT_MS
    )
    page.wait_for_timeout(300)


def choose(page, label: str, option: str) -> None:
    page.get_by_role("combobox", name=label).click()
    page.get_by_role("option").filter(has_text=option).first.click()
    settle(page)


def test_hostile_names_render_as_text(open_dashboard: Dashboard, browser) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    try:
        page.goto(f"{open_dashboard.url}/history", timeout=PAGE_TIMEOUT_MS)
        page.wait_for_selector("h1", timeout=PAGE_TIMEOUT_MS)
        settle(page)
        choose(page, "Model", "mobilenet")
        choose(page, "Device", "android:pixel4a")
        # the page re-runs for the chosen device: wait for its banner, not the one before
        banner = page.locator('[data-testid="stAlert"]').filter(has_text="3 regression(s)")
        assert banner.first.inner_text(timeout=PAGE_TIMEOUT_MS).startswith("3 regression(s)")
        details = page.locator('[data-testid="stCode"]').first.inner_text()
        assert f"cpu in {CAMPAIGN} (+" in details, details
        assert page.locator(f'a[href*="{EVIL}"]').count() == 0
        assert page.locator(f'img[src*="{EVIL}"]').count() == 0
        assert page.locator("b", has_text="b").count() == 0
        assert [u for u in asked if EVIL in u] == []
    finally:
        page.close()


FIELD = "Password or token"


def login(page, url: str, password: str) -> str:
    """Type `password` into the login form; the message shown after it ('' once in)."""
    if FIELD not in page.content():
        page.goto(url, timeout=PAGE_TIMEOUT_MS)
    field = page.get_by_label(FIELD, exact=True)
    field.wait_for(timeout=PAGE_TIMEOUT_MS)
    field.fill(password)
    field.press("Enter")
    page.wait_for_load_state()
    if page.locator("#message").count():
        return page.locator("#message").inner_text()
    settle(page)
    return ""


def logged_in(browser, url: str, secret: str, path: str = "/"):
    """A new page, logged in with `secret` from `url + path`, on that page."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url + path, timeout=PAGE_TIMEOUT_MS)
    assert login(page, url, secret) == ""
    return page


def test_wrong_passwords_are_throttled_per_client(guarded: Dashboard, browser) -> None:
    page = browser.new_page()
    try:
        messages = [login(page, guarded.url, f"guess{i}") for i in range(3)]
        wrong = "Wrong password or token."
        assert messages[:2] == [wrong, wrong], messages
        assert messages[2] == f"{wrong} Next attempt in {DELAY_S} s.", messages
        # locked out: not even the right password is checked
        assert login(page, guarded.url, PASSWORD).startswith("Too many wrong passwords")
        assert page.get_by_label(FIELD, exact=True).count() == 1
    finally:
        page.close()
    fresh = browser.new_page()  # a new session from the same client is throttled as well
    try:
        assert login(fresh, guarded.url, PASSWORD).startswith("Too many wrong passwords")
    finally:
        fresh.close()


#: Each page's URL path and its title.
PAGE_TITLES = {
    "fleet": "Fleet",
    "campaigns": "Campaigns",
    "compare": "Compare devices",
    "accuracy": "Accuracy",
    "op_coverage": "Op coverage",
    "compatibility": "Compatibility",
    "history": "History",
}


def title(page) -> str:
    page.wait_for_selector("h1", timeout=PAGE_TIMEOUT_MS)
    settle(page)
    return page.locator("h1").first.inner_text().strip()


def test_a_page_asked_for_before_the_login_opens_after_it(users, browser) -> None:
    d, tokens = users
    page = browser.new_page()
    try:
        page.goto(f"{d.url}/compare", timeout=PAGE_TIMEOUT_MS)
        assert "/_df/login?next=%2Fcompare" in page.url
        assert login(page, d.url, tokens["read"]) == ""
        assert page.url == f"{d.url}/compare" and title(page) == "Compare devices"
    finally:
        page.close()


def test_a_login_survives_a_reload(users, browser) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["submit"], "/history")
    try:
        assert title(page) == "History"
        page.reload()
        assert title(page) == "History" and page.url == f"{d.url}/history"
        assert FIELD not in page.content()
        assert "signed in as sam (submit)" in page.inner_text("body")
    finally:
        page.close()


@pytest.mark.parametrize("path", list(PAGE_TITLES))
def test_every_page_has_its_url(users, browser, path: str) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["read"], f"/{path}")
    try:
        assert title(page) == PAGE_TITLES[path]
        assert "Page not found" not in page.inner_text("body")
        page.goto(f"{d.url}/{path}", timeout=PAGE_TIMEOUT_MS)  # typed again, logged in
        assert title(page) == PAGE_TITLES[path]
        assert "Page not found" not in page.inner_text("body")
    finally:
        page.close()


def test_downloads_need_the_login(users, browser) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["read"], "/compatibility")
    try:
        assert title(page) == "Compatibility"
        button = page.locator('[data-testid="stDownloadButton"] button').first
        button.wait_for(timeout=PAGE_TIMEOUT_MS)
        with page.expect_download(timeout=PAGE_TIMEOUT_MS) as info:
            button.click()
        url = info.value.url
        assert "/media/" in url, url
        assert page.context.request.get(url).status == 200  # with the login cookie
        assert http_status(url) == 401  # the same URL without it
    finally:
        page.close()
    stranger = browser.new_page()
    try:
        stranger.goto(url, timeout=PAGE_TIMEOUT_MS)
        assert "tflite" not in stranger.content() and "status" not in stranger.content()
    finally:
        stranger.close()


def test_a_job_s_artifact_downloads_whole_with_the_login(users, browser) -> None:
    """The campaigns page's artifact download, made when clicked: the stored bytes."""
    d, tokens = users
    page = logged_in(browser, d.url, tokens["read"], "/campaigns")
    try:
        button = page.locator('[data-testid="stDownloadButton"] button').first
        button.wait_for(timeout=PAGE_TIMEOUT_MS)
        with page.expect_download(timeout=PAGE_TIMEOUT_MS) as info:
            button.click()
        assert info.value.suggested_filename.endswith("-1-logcat.txt")
        assert Path(info.value.path()).read_bytes() == LOGCAT
    finally:
        page.close()


@pytest.mark.parametrize(
    "path", ["/media/abc.json", "/_stcore/host-config", "/static/js/index.js", "/component/x"]
)
def test_streamlit_routes_refuse_visitors_without_a_login(users, path: str) -> None:
    d, _ = users
    assert http_status(f"{d.url}{path}") == 401
    assert http_status(f"{d.url}/_stcore/health") == 200


def upload_status(page, url: str) -> int:
    """A file upload's HTTP status, with the page's cookies and Streamlit's XSRF token."""
    xsrf = next(c["value"] for c in page.context.cookies() if c["name"] == "_streamlit_xsrf")
    response = page.context.request.put(
        f"{url}/_stcore/upload_file/session/file",
        multipart={"file": "x"},
        headers={"X-Xsrftoken": xsrf},
    )
    return response.status


def test_the_read_role_submits_nothing(users, browser) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["read"], "/campaigns")
    try:
        assert title(page) == "Campaigns"
        body = page.inner_text("body")
        assert "read-only" in body and "signed in as rita (read)" in body
        assert page.locator('[data-testid="stFileUploader"]').count() == 0
        assert upload_status(page, d.url) == 403
    finally:
        page.close()


def test_the_submit_role_may_submit(users, browser) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["submit"], "/campaigns")
    try:
        assert title(page) == "Campaigns"
        page.locator('[data-testid="stFileUploader"]').wait_for(timeout=PAGE_TIMEOUT_MS)
        assert upload_status(page, d.url) != 403
    finally:
        page.close()


def test_log_out_ends_the_login(users, browser) -> None:
    d, tokens = users
    page = logged_in(browser, d.url, tokens["read"], "/fleet")
    try:
        assert title(page) == "Fleet"
        with page.expect_popup(timeout=PAGE_TIMEOUT_MS) as tab:  # Streamlit links open a tab
            page.get_by_text("Log out").click()
        tab.value.wait_for_url("**/_df/login**", timeout=PAGE_TIMEOUT_MS)
        page.goto(f"{d.url}/fleet", timeout=PAGE_TIMEOUT_MS)
        assert "/_df/login" in page.url and FIELD in page.content()
    finally:
        page.close()


@pytest.mark.parametrize(
    "path", ["/_stcore/metrics", "//_stcore/metrics", "/_stcore/metrics/", "/_stcore/%6detrics"]
)
def test_the_metrics_endpoint_is_off(guarded: Dashboard, path: str) -> None:
    assert http_status(f"{guarded.url}/_stcore/health") == 200
    assert http_status(f"{guarded.url}{path}") == 404


def test_sigterm_stops_the_server(tmp_path: Path) -> None:
    _browser_ready()
    d = Dashboard(tmp_path)
    try:
        os.kill(d.proc.pid, signal.SIGTERM)  # the command only, as a service manager does
        d.proc.wait(20)
        deadline = time.monotonic() + 20
        while http_status_or_none(f"{d.url}/_stcore/health") is not None:
            assert time.monotonic() < deadline, "the Streamlit server outlived its command"
            time.sleep(0.3)
    finally:
        d.stop()
