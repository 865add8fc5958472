"""The mistakes a newcomer makes with the farm commands (run, submit, status, results,
devices, cancel, allowlist, reconcile, worker, dashboard, db), each run as a subprocess on
an embedded SQLite home in tmp_path: one clear error line, exit 2 for a flag argparse
refuses (before any work), 1 for what the farm refuses, and never a traceback; and what
the commands print for people: help with defaults, readable summaries, aligned tables."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delegate_runtime.builder import ModelBuilder

#: The farm's commands (cli.py's name -> module), as issue 18 lists them.
FARM_COMMANDS = {
    "run": "devicefarm.commands.run",
    "submit": "devicefarm.commands.submit",
    "status": "devicefarm.commands.status",
    "results": "devicefarm.commands.results",
    "devices": "devicefarm.commands.devices",
    "cancel": "devicefarm.commands.cancel",
    "allowlist": "devicefarm.commands.allowlist",
    "reconcile": "devicefarm.commands.reconcile",
    "worker": "worker_agent.command",
    "dashboard": "devicefarm.commands.dashboard",
    "db": "devicefarm.commands.db",
}


def farm(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`devicefarm ARGS` with DEVICEFARM_HOME=home (its own SQLite file and broker)."""
    exe = shutil.which("devicefarm")
    cmd = [exe] if exe else [sys.executable, "-m", "devicefarm.cli"]
    env = {k: v for k, v in os.environ.items() if k not in ("DEVICEFARM_DB", "DEVICEFARM_BROKER")}
    env["DEVICEFARM_HOME"] = str(home)
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


def assert_one_line_error(r: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """Exit `code`, no traceback, and the error on one stderr line (argparse's usage lines
    may come before it) that starts `devicefarm ` and holds every fragment."""
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert lines, r.stdout
    last = lines[-1]
    assert last.startswith("devicefarm "), r.stderr
    if code == 1:  # the farm's own errors: that line is all of stderr
        assert len(lines) == 1, r.stderr
    for fragment in fragments:
        assert fragment in last, last
    return last


def _model(scale: float) -> bytes:
    """y = x * scale on (1, 4) floats: a tiny valid model; `scale` makes its bytes differ."""
    import numpy as np

    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32)
    s = g.const("s", np.full((1, 4), scale, np.float32))
    y = g.tensor("y", (1, 4), np.float32)
    g.op("MUL", [x, s], [y])
    g.output(y)
    return b.build()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, Path]:
    """A home where `devicefarm run` measured a model on a no-op device: (home, model)."""
    root = tmp_path_factory.mktemp("farm")
    model = root / "mul.tflite"
    model.write_bytes(_model(2.0))
    r = farm(root / "home", "run", str(model), "--devices", "noop:a", "--runs", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    return root / "home", model


# -- numbers argparse refuses: exit 2, before discovery, the database or the broker --------

BAD_NUMBERS = [
    (["run", "m.tflite", "--runs", "-5"], "argument --runs: must be from 1 to 100000, not -5"),
    (["run", "m.tflite", "--runs", "0"], "argument --runs: must be from 1 to 100000, not 0"),
    (["run", "m.tflite", "--runs", "many"], "argument --runs: not a whole number: 'many'"),
    (["run", "m.tflite", "--diff-runs", "-1"], "argument --diff-runs: must be from 0 to"),
    (["run", "m.tflite", "--timeout", "0"], "argument --timeout: must be more than 0, not 0"),
    (["run", "m.tflite", "--timeout", "nan"], "argument --timeout: must be more than 0"),
    (["submit", "m.tflite", "--runs", "100001"], "argument --runs: must be from 1 to 100000"),
    (["submit", "m.tflite", "--priority", "10"], "argument --priority: must be from 0 to 9"),
    (["submit", "m.tflite", "--max-model-mb", "0"], "argument --max-model-mb: must be more"),
    (["status", "0"], "argument campaign: must be 1 or more, not 0"),
    (["results", "x"], "argument campaign: not a whole number: 'x'"),
    (["cancel", "0"], "argument campaign: must be 1 or more, not 0"),
    (["reconcile", "--every", "-1"], "argument --every: must be more than 0, not -1"),
    (["dashboard", "--port", "70000"], "argument --port: must be from 1 to 65535, not 70000"),
    (["worker", "--loglevel", "loud"], "argument --loglevel: invalid choice: 'LOUD'"),
    (["allowlist", "--min-runs", "0"], "argument --min-runs: must be 1 or more, not 0"),
    (["allowlist", "--min-speedup", "-1"], "argument --min-speedup: must be 0 or more"),
]


@pytest.mark.parametrize(("args", "message"), BAD_NUMBERS, ids=lambda v: " ".join(v)[:40])
def test_a_bad_number_is_a_usage_error(home, args, message):
    start = time.monotonic()
    r = farm(home, *args)
    assert_one_line_error(r, 2, message)
    assert "devices:" not in r.stdout  # nothing was discovered or checked
    assert not home.exists()  # no database was opened
    assert time.monotonic() - start < 30


# -- what the farm refuses: exit 1, one line ------------------------------------------------


@pytest.fixture
def empty_home(home: Path) -> Path:
    """A home holding a farm with nothing in it (the commands refuse a home with none)."""
    from farm_core.database import open_database

    open_database(f"sqlite:///{home / 'farm.db'}").dispose()
    return home


def test_cancel_an_unknown_campaign(empty_home):
    assert_one_line_error(farm(empty_home, "cancel", "999"), 1, "no campaign 999")


@pytest.mark.parametrize("command", ["status", "results"])
def test_show_an_unknown_campaign(empty_home, command):
    assert_one_line_error(farm(empty_home, command, "999"), 1, "campaign 999 has no jobs")


@pytest.mark.parametrize(
    ("url", "code", "fragment"),
    [
        ("bogus://x", 2, "argument --db: bad database URL"),  # as parsed, before any work
        ("postgresql://nobody@127.0.0.1:1/none", 1, "cannot reach the database"),
    ],
    ids=["unknown-scheme", "unreachable"],
)
@pytest.mark.parametrize("command", ["status", "devices", "db current", "reconcile"])
def test_a_bad_database_url(home, command, url, code, fragment):
    assert_one_line_error(farm(home, *command.split(), "--db", url), code, fragment)


@pytest.mark.parametrize(
    ("url", "fragment"),
    [("bogus://x", "no transport for 'bogus'"), ("localhost", "expected SCHEME://")],
    ids=["unknown-scheme", "no-scheme"],
)
@pytest.mark.parametrize("command", ["submit", "run", "reconcile"])
def test_a_bad_broker_url(home, tmp_path, command, url, fragment):
    model = tmp_path / "m.tflite"
    model.write_bytes(_model(1.0))
    args = [] if command == "reconcile" else [str(model)]
    r = farm(home, command, *args, "--broker", url)
    assert_one_line_error(r, 2, f"argument --broker: bad broker URL {url!r}", fragment)
    assert not home.exists()


@pytest.mark.parametrize("command", ["run", "submit"])
def test_a_missing_model(ran, tmp_path, command):
    home, _ = ran  # its noop device is registered: the model is the only mistake
    missing = tmp_path / "nope.tflite"
    r = farm(home, command, str(missing), "--devices", "noop:a" if command == "run" else "all")
    line = assert_one_line_error(r, 1, f"model {missing}: cannot read it")
    if command == "run":  # refused before devices are started and checked
        assert "devices:" not in r.stdout, line


def test_a_selector_with_an_unknown_field(ran, tmp_path):
    home, model = ran
    r = farm(home, "submit", str(model), "--devices", "colour=red")
    # a usage error, found as the arguments are parsed: nothing was submitted
    assert_one_line_error(r, 2, "argument --devices: unknown selector field 'colour'")


# -- allowlist --model: the file just run, or a unique sha256 prefix of 4+ characters ------


@pytest.mark.parametrize("how", ["path", "prefix4", "sha256", "name"])
def test_allowlist_finds_the_model(ran, how):
    home, model = ran
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    ref = {"path": str(model), "prefix4": sha[:4], "sha256": sha, "name": model.name}[how]
    r = farm(home, "allowlist", "--model", ref, "--format", "json", "--out", "-")
    assert r.returncode == 0, r.stderr
    assert sha in r.stdout and "Traceback" not in r.stderr


def test_allowlist_of_a_file_never_run(ran, tmp_path):
    home, _ = ran
    other = tmp_path / "other.tflite"
    other.write_bytes(_model(3.0))
    r = farm(home, "allowlist", "--model", str(other), "--out", "-")
    assert_one_line_error(r, 1, f"model file {other}", "was never run on the farm")


def test_allowlist_prefix_too_short(ran):
    home, model = ran
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    r = farm(home, "allowlist", "--model", sha[:3], "--out", "-")
    assert_one_line_error(r, 1, f"no model {sha[:3]!r}", "prefix of 4+ characters")


def _two_models_sharing_a_prefix(folder: Path) -> tuple[Path, Path]:
    """Two valid models whose sha256 share their first 4 hex digits (a birthday search
    over the MUL constant: a few hundred models)."""
    seen: dict[str, bytes] = {}
    for i in range(100_000):
        data = _model(1.0 + i / 1024)
        prefix = hashlib.sha256(data).hexdigest()[:4]
        if prefix in seen:
            a, b = folder / "a.tflite", folder / "b.tflite"
            a.write_bytes(seen[prefix])
            b.write_bytes(data)
            return a, b
        seen[prefix] = data
    raise AssertionError("no shared prefix found")


def test_allowlist_ambiguous_prefix_lists_candidates(tmp_path):
    a, b = _two_models_sharing_a_prefix(tmp_path)
    home = tmp_path / "home"
    r = farm(home, "run", str(a), str(b), "--devices", "noop:a", "--runs", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    prefix = hashlib.sha256(a.read_bytes()).hexdigest()[:4]
    r = farm(home, "allowlist", "--model", prefix, "--out", "-")
    last = assert_one_line_error(r, 1, f"model {prefix!r} is ambiguous", "give more of")
    assert "a.tflite (" in last and "b.tflite (" in last


# -- what the commands print for people ----------------------------------------------------


def test_cancel_a_finished_campaign_says_none_cancelled(ran):
    home, _ = ran
    r = farm(home, "cancel", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "campaign 1: 0 job(s) cancelled"


def test_reconcile_prints_a_summary(ran):
    home, _ = ran
    r = farm(home, "reconcile")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "reconcile: nothing to do"
    assert "ReconcileReport(" not in r.stdout


def test_reconcile_summary_names_what_changed():
    """A pass that did something: one clause per kind of change, with its ids."""
    from devicefarm.commands.reconcile import summary
    from orchestrator.reconciler import ReconcileReport

    report = ReconcileReport(
        went_offline=["noop:a"], expired=[3, 4], sent=2, broker_error="refused\ntrace"
    )
    assert summary(report) == (
        "reconcile: 1 device(s) went offline: noop:a; 2 job(s) expired: 3, 4; "
        "2 message(s) sent; broker error: refused"
    )


def test_devices_is_an_aligned_table(ran):
    home, _ = ran
    r = farm(home, "devices")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.strip().splitlines()
    assert header.split() == [
        "device",
        "state",
        "health",
        "host",
        "model",
        "driver",
        "seen",
        "tags",
        "reason",
    ]
    for column in ("state", "health", "host"):  # each value starts under its header
        assert row[header.index(column)] != " " and row[header.index(column) - 1] == " "
    assert row.startswith("noop:a ")


def test_devices_gives_a_quarantined_devices_reason_on_its_row(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(_model(1.0))
    home = tmp_path / "home"
    r = farm(home, "run", str(model), "--devices", "noop:a,noop:sick?canary=fail", "--runs", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    r = farm(home, "devices")
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.strip().splitlines()
    assert len(rows) == 2, r.stdout
    sick = next(row for row in rows if row.startswith("noop:sick "))
    assert sick[header.index("health") :].startswith("quarantined ")
    why = "canary failed: DeviceError: no-op device noop:sick fails its canary on purpose"
    assert sick[header.index("reason") :] == why


def test_devices_cuts_a_long_reason_to_its_first_line():
    """A canary's failure can hold a compiler's whole log: the row keeps one line of it."""
    from devicefarm.commands.devices import REASON_CHARS, table

    long = "canary failed: CL_BUILD_PROGRAM_FAILURE " + "x" * 300
    reason = "\n".join([long, "", "error: unknown target CPU"])
    lines = table([{"key": "opencl:x", "health": "quarantined", "health_reason": reason}])
    header, only = lines.splitlines()
    assert only[header.index("reason") :] == long[: REASON_CHARS - 3] + "..."


def test_run_progress_lines_say_what_their_times_are(ran):
    home, model = ran
    r = farm(home, "run", str(model), "--devices", "noop:a", "--runs", "1", "--diff-runs", "0")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("[")]
    assert lines, r.stdout
    for line in lines:  # the job's own run and the time since the campaign started
        assert ", took " in line and "(t+" in line, line


def test_run_shows_a_long_jobs_progress(tmp_path):
    """A job that runs for half a minute prints, as its worker stores it (every
    PROGRESS_EVERY_S), its runs done of those planned and their rate (a GPU job on PoCL
    can take minutes). The runs that last that long on this machine are found by trying:
    other work shares its cores."""
    from worker_agent.lease import PROGRESS_EVERY_S

    long_s = 2 * PROGRESS_EVERY_S + 5  # the first progress line shows at t+20 s at the latest
    model = tmp_path / "example.tflite"
    assert farm(tmp_path, "example", str(model)).returncode == 0
    runs, took = 2000, 0.0
    for _ in range(6):  # aim past long_s: the machine's speed changes between tries
        r = farm(tmp_path / "home", "run", str(model), "--devices", "cpu", "--runs", str(runs))
        assert r.returncode == 0, r.stdout + r.stderr
        took = float(re.search(r"took ([\d.]+) s", r.stdout).group(1))
        if took >= long_s:
            break
        runs = min(200_000, int(runs * 4 * PROGRESS_EVERY_S / max(took, 0.1)))
    assert took >= long_s, f"no job lasted {long_s} s: {r.stdout}"
    running = re.compile(
        rf"^  cpu:\S+ cpu: running, benchmark: \d+/{runs} runs, "
        r"[\d.]+ (runs/s|s/run), \d+ s \(t\+[\d.]+ s\)$"
    )
    assert any(running.match(line) for line in r.stdout.splitlines()), r.stdout


def _serve_dashboard(home: Path, port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVICEFARM_")}
    env["DEVICEFARM_HOME"] = str(home)
    exe = shutil.which("devicefarm")
    cmd = [exe] if exe else [sys.executable, "-m", "devicefarm.cli"]
    with log.open("w") as out:
        return subprocess.Popen(
            [*cmd, "dashboard", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_dashboard_on_results_without_memory_warns_nothing(ran, tmp_path):
    """No-op devices measure no peak memory: the compare page says so, where an empty chart
    made Altair warn in the server's log and Vega in the browser's console."""
    import urllib.request

    from tests.conftest import require
    from tests.support.farm import free_port, kill_group, wait_until

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    require(os.path.exists(chromium), "chromium")
    require(importlib.util.find_spec("playwright") is not None, "the playwright package")
    from playwright.sync_api import sync_playwright

    home, _ = ran
    port, log = free_port(), tmp_path / "dashboard.log"
    proc = _serve_dashboard(home, port, log)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).status == 200
        except OSError:
            return proc.poll() is not None

    console: list[str] = []
    try:
        wait_until(healthy, 60, "the dashboard")
        assert proc.poll() is None, log.read_text()
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.goto(f"{url}/compare", timeout=30_000)
            page.wait_for_selector(
                '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=30_000
            )
            page.wait_for_timeout(1000)
            body = page.inner_text("body")
            browser.close()
    finally:
        kill_group(proc)
        proc.wait()
    assert "Peak memory: not measured by these results." in body, body
    assert not [m for m in console if "Infinite extent" in m], console
    server_log = log.read_text()
    assert "Warning" not in server_log and "Traceback" not in server_log, server_log


def test_results_table_splits_init(ran):
    home, _ = ran
    r = farm(home, "results", "1")
    assert r.returncode == 0, r.stderr
    assert "init ms" in r.stdout and "+process ms" in r.stdout


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


@pytest.mark.parametrize("command", list(FARM_COMMANDS))
def test_every_flag_has_help_and_says_its_default(command):
    parser = argparse.ArgumentParser(prog=f"devicefarm {command}")
    importlib.import_module(FARM_COMMANDS[command]).add_arguments(parser)
    for action in _actions(parser):
        name = action.option_strings[0] if action.option_strings else action.dest
        assert action.help, f"{command} {name} has no help"
        if action.default not in (None, False, "", []) and action.option_strings:
            assert "default" in action.help, f"{command} {name} hides its default"


def test_run_and_submit_default_to_the_same_diff_runs():
    defaults = {}
    for command in ("run", "submit"):
        parser = argparse.ArgumentParser()
        importlib.import_module(FARM_COMMANDS[command]).add_arguments(parser)
        defaults[command] = parser.parse_args(["m.tflite"]).diff_runs
    from orchestrator.submit import RunSettings

    assert defaults["run"] == defaults["submit"] == RunSettings().diff_runs
