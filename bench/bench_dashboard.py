"""Dashboard pages on 100,000 result rows in PostgreSQL: each page's queries, then the page
rendered through AppTest (queries included) in fresh sessions of a dashboard process that
has started (dashboard/preload.py, as serve.py does), cold (the first) and warm
(the best of the next two: what the dashboard process keeps, dashboard.cache, reused),
against a 1 s target (issue 44). The compatibility page is measured cold three times: with no
evidence stored in the database (`none stored`: read from the results, then stored), with
only an older version's stored a moment ago (`older stored`: a busy farm's fresh process,
which shows it and reads again in the background), and as a fresh dashboard process that
finds its version stored (dashboard.evidence_store). Last, the
first view of compare and compatibility in a new process each (after its preload and the
fleet page, as a visitor landing on `/`).

    python bench/bench_dashboard.py [--results 100000] [--devices 56] [--models 4]
        [--url postgresql://...]

`--devices`: the fleet's size (the demo lab's 16 devices, then phones of five GPU
generations, each its own model; 1000 for issue 44's farm). `--models`: the catalogue (the
demo lab's 4, then classifiers of varied cost, run on every device in the newest campaign:
100 for issue 44's farm; `--results` counts the demo's campaigns only).

Uses a fresh database `devicefarm_bench_<pid>` on DEVICEFARM_TEST_PG_URL (default
postgresql://postgres:postgres@127.0.0.1:5432/postgres), dropped at the end. The anchor is
the time of `SELECT count(*) FROM results` in the same run.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, func, select, text, update
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dashboard import cache, queries  # noqa: E402
from dashboard.preload import preload  # noqa: E402
from devicefarm.demo_lab import DEVICES, MODELS, extra_phones, seed  # noqa: E402
from farm_core.configs import KIND_CONFIGS  # noqa: E402
from farm_core.database import make_engine, open_database  # noqa: E402
from farm_core.schema import Device, KeptEvidence, Result, StoredModel  # noqa: E402
from orchestrator.allowlist.rules import Thresholds  # noqa: E402

TARGET_S = 1.0
DEFAULT_URL = "postgresql://postgres:postgres@127.0.0.1:5432/postgres"
PAGES = ("fleet", "campaigns", "compare", "delegates", "accuracy", "op_coverage", "compatibility",
         "history")  # fmt: skip


def best_of(fn: Callable[[], Any], n: int = 3) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def page_queries(engine: Any, sha: str) -> dict[str, Callable[[], Any]]:
    """What each page queries with its first choices (the first campaign, model, device)."""
    name = queries.lineages(engine)[0]
    return {
        "fleet": lambda: queries.fleet(engine),
        "campaigns": lambda: (queries.campaigns(engine), queries.campaign_failures(engine, 1)),
        "compare": lambda: (queries.models(engine), queries.compare(engine, sha)),
        "delegates": lambda: queries.delegate_choice(
            engine, queries.campaigns(engine)[0]["campaign"]
        ),
        "accuracy": lambda: (queries.models(engine), queries.accuracy(engine, sha)),
        "op_coverage": lambda: (queries.models(engine), queries.op_coverage(engine, sha)),
        "compatibility": lambda: queries.matrix(  # the first page's models (its default: 5)
            queries.allowlists(engine, Thresholds(), list(queries.list_models(engine))[:5])
        ),
        "history": lambda: queries.flag_regressions(
            queries.lineage_history(engine, name, queries.lineage_devices(engine, name)[0])
        ),
    }


def render(name: str, n: int = 3) -> tuple[float, float]:
    """A page's run in a fresh session (queries included): the first (cold: nothing the
    dashboard process keeps, dashboard.cache), and the best of the `n - 1` after it."""
    from streamlit.testing.v1 import AppTest

    times = []
    for _ in range(n):
        at = AppTest.from_file(str(REPO / "dashboard" / "app.py"), default_timeout=120)
        at.run()
        at.switch_page(f"views/{name}.py")
        start = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - start)
        if at.exception:
            raise SystemExit(f"page {name} raised: {at.exception[0].value}")
    return times[0], min(times[1:])


def rekey_stored(engine: Engine, keys: dict[tuple[str, str], str] | None = None) -> dict:
    """Key every stored evidence row by an unknown version (as if a result of each model
    had come since), or, given what this returned, by the versions they had; the keys they
    had."""
    with engine.begin() as c:
        rows = c.execute(select(KeptEvidence.scope, KeptEvidence.model, KeptEvidence.version))
        had = {(scope, model): version for scope, model, version in rows}
        for scope, model in had:
            c.execute(
                update(KeptEvidence)
                .where(KeptEvidence.scope == scope, KeptEvidence.model == model)
                .values(version=(keys or {}).get((scope, model), "0" * 64))
            )
    return had


#: What a new dashboard process runs for a page's first view (after the fleet page, as `/`).
FIRST_VIEW = """
import logging, sys, time
sys.path.insert(0, {repo!r})
logging.getLogger("streamlit").setLevel(logging.ERROR)
from dashboard.preload import preload
preload()
from streamlit.testing.v1 import AppTest
at = AppTest.from_file({app!r}, default_timeout=120)
at.run()
at.switch_page("views/{page}.py")
start = time.perf_counter()
at.run()
print("raised" if at.exception else time.perf_counter() - start)
"""


def first_view(page: str) -> float:
    """A page's first view in a new process that started as serve.py does (preload)."""
    code = FIRST_VIEW.format(repo=str(REPO), app=str(REPO / "dashboard" / "app.py"), page=page)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    last = out.stdout.split()[-1]
    if last == "raised":
        raise SystemExit(f"page {page} raised in a new process")
    return float(last)


def main() -> int:
    logging.getLogger("streamlit").setLevel(logging.ERROR)  # AppTest's bare-mode warnings
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=int, default=100_000)
    ap.add_argument("--devices", type=int, default=56, help="devices in the fleet (at least 16)")
    ap.add_argument(
        "--models",
        type=int,
        default=len(MODELS),
        help=f"models (at least the demo's {len(MODELS)}; the others run in the newest campaign)",
    )
    ap.add_argument("--url", default=os.environ.get("DEVICEFARM_TEST_PG_URL", DEFAULT_URL))
    ap.add_argument("--keep", action="store_true", help="keep the database (prints its name)")
    ap.add_argument("--db", default="", help="measure a database --keep kept (no seeding)")
    args = ap.parse_args()
    admin = make_engine(args.url).execution_options(isolation_level="AUTOCOMMIT")
    name = args.db or f"devicefarm_bench_{os.getpid()}"
    if not args.db:
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(args.url).set(database=name).render_as_string(hide_password=False)
    try:
        engine = open_database(url)
        if not args.db:
            extra = max(args.devices - len(DEVICES) - 1, 0)  # the demo's new phone is one more
            fleet = [*DEVICES, *extra_phones(extra)]
            per_campaign = len(MODELS) * sum(len(KIND_CONFIGS[d.kind]) for d in fleet)
            campaigns = max(2, round(args.results / per_campaign))
            more = max(args.models - len(MODELS), 0)
            start = time.perf_counter()
            summary = seed(
                engine, campaigns=campaigns, extra_devices=extra, days=180, more_models=more
            )
            print(
                f"seeded {summary.results} results, {summary.jobs} jobs, {summary.campaigns} "
                f"campaigns, {len(summary.devices)} devices, {len(summary.models)} models in "
                f"{time.perf_counter() - start:.1f} s"
            )
        with engine.begin() as c:
            c.execute(text("ANALYZE"))
        with engine.connect() as c:
            anchor = best_of(lambda: c.execute(text("SELECT count(*) FROM results")).scalar())
        print(f"anchor: SELECT count(*) FROM results: {anchor * 1000:.1f} ms")
        with engine.connect() as c:
            sha = c.execute(select(StoredModel.sha256).where(StoredModel.name == MODELS[0].name))
            sha = sha.scalar_one()
            n_devices = c.execute(select(func.count()).select_from(Device)).scalar_one()
            n_models = c.execute(select(func.count()).select_from(StoredModel)).scalar_one()
            n_results = c.execute(select(func.count()).select_from(Result)).scalar_one()
        print(f"database {name}: {n_results} results, {n_devices} devices, {n_models} models")
        os.environ["DEVICEFARM_DB"] = url
        # as `devicefarm dashboard` starts (serve.py): the first views are measured after it
        print(f"dashboard process start: preload {preload():.3f} s (dashboard/preload.py)")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load {load}")
        print(f"{'page':14} {'queries s':>10} {'cold s':>7} {'warm s':>7} {'x anchor':>9}  "
              f"target {TARGET_S} s (warm)")  # fmt: skip
        worst = worst_cold = 0.0
        for page, fn in page_queries(engine, sha).items():
            q = best_of(fn)
            if page == "compatibility":  # first with no evidence stored: it is read, stored
                with engine.begin() as c:
                    c.execute(delete(KeptEvidence))
                cache.forget()
                cold, _ = render(page, 2)
                print(f"{'  none stored':14} {'':10} {cold:7.3f}")
                stored_as = rekey_stored(engine)  # as at later versions: the rows older
                cache.forget()  # a fresh process: the row read within a minute shown
                cold, _ = render(page, 2)
                print(f"{'  older stored':14} {'':10} {cold:7.3f}")
                rekey_stored(engine, stored_as)  # this version's again
                cache.forget()  # then as a fresh dashboard process: the stored evidence read
            cold, warm = render(page)
            worst, worst_cold = max(worst, warm), max(worst_cold, cold)
            flag = "ok" if warm < TARGET_S else "SLOW"
            print(f"{page:14} {q:10.3f} {cold:7.3f} {warm:7.3f} {warm / anchor:9.0f}  {flag}")
        for page in ("compare", "compatibility"):  # the evidence stored by the run above
            print(f"{page}: first view in a new dashboard process {first_view(page):.3f} s")
        print(f"slowest: {worst:.3f} s warm ({'within' if worst < TARGET_S else 'over'} target), "
              f"{worst_cold:.3f} s cold")  # fmt: skip
        engine.dispose()
        return 0 if worst < TARGET_S else 1
    finally:
        if args.keep or args.db:
            print(f"kept: --db {name}")
        else:
            with admin.connect() as c:
                c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    sys.exit(main())
