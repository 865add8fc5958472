"""The CI gate on a real farm (PostgreSQL, Redis, agents with Celery consumers): `submit
--wait` exit codes, progress (running jobs' too, from the agents' progress records) and
JUnit; `status`/`results` exit 1 on failed jobs; `rerun` re-attempts exactly the failed
cells; a slowed model of the same name (lineage) is a regression (exit 3) once paired runs
on the host CPU confirm it, and shows as one in `status` and `results`; a suspect its
paired runs clear passes (exit 0)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from farm_core.schema import Attempt, Campaign, Job, Result
from orchestrator.confirm import CONFIRMS_CAMPAIGN
from tests.conftest import require
from tests.integration.conftest import PG_ADMIN_URL, REPO
from worker_agent.devices import host_name

CLI_TIMEOUT_S = 240


def cli(farm, *args: str) -> subprocess.CompletedProcess:
    """`devicefarm ARGS --db ... [--broker ...]` as a user's CI job runs it."""
    extra = ["--db", farm.db_url]
    if args[0] in ("submit", "rerun"):
        extra += ["--broker", farm.broker_url]
    return subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", *args, *extra],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=str(REPO),
    )


def junit_counts(path: Path) -> tuple[int, int, list[str]]:
    suite = ET.parse(path).getroot().find("testsuite")
    types = [f.get("type") for f in suite.iter("failure")]
    return int(suite.get("tests")), int(suite.get("failures")), types


def test_a_clean_run_exits_0_with_progress_and_junit(farm, start_agent, models, tmp_path) -> None:
    start_agent("a", ["noop:a?delay_s=0.3", "noop:b?delay_s=0.3"], farm.db_url, farm.broker_url)
    (model,) = models(1)
    report = tmp_path / "junit.xml"
    done = cli(farm, "submit", str(model), "--devices", "kind=noop", "--configs", "cpu")
    assert done.returncode == 0, done.stderr  # without --wait: submitted is success
    done = cli(
        farm, "submit", str(model), "--devices", "kind=noop", "--configs", "cpu",
        "--wait", "--junit", str(report),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[1/2] noop:" in done.stdout and "[2/2] noop:" in done.stdout
    assert "regressions (0 of 2 judged" in done.stdout
    assert junit_counts(report) == (2, 0, [])


def test_the_wait_shows_running_jobs_and_names_each_model(
    farm, start_agent, models, tmp_path
) -> None:
    # a no-op device that takes 4 s a job, reporting each of its 4 runs as it goes
    start_agent("a", ["noop:slow?delay_s=4"], farm.db_url, farm.broker_url)
    first, second = models(2)
    done = cli(
        farm, "submit", str(first), str(second), "--devices", "kind=noop", "--configs", "cpu",
        "--runs", "4", "--wait",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    running = r"^  m[01]\.tflite noop:slow cpu: running, benchmark: [1-4]/4 runs, .* \(t\+"
    assert re.search(running, done.stdout, re.M), done.stdout
    ended = re.findall(r"^\[\d/2\] (m[01]\.tflite) noop:slow cpu: succeeded", done.stdout, re.M)
    assert sorted(ended) == ["m0.tflite", "m1.tflite"], done.stdout


def test_failed_cells_exit_1_and_rerun_retries_exactly_them(
    farm, start_agent, models, tmp_path
) -> None:
    broken = start_agent(
        "a", ["noop:good?delay_s=0.2", "noop:bad?error=model"], farm.db_url, farm.broker_url
    )
    (model,) = models(1)
    report = tmp_path / "junit.xml"
    done = cli(
        farm, "submit", str(model), "--devices", "kind=noop", "--configs", "cpu",
        "--wait", "--junit", str(report),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "failed jobs (1):" in done.stdout and "noop:bad cpu: failed" in done.stdout
    assert junit_counts(report) == (2, 1, ["failed"])
    assert cli(farm, "status", "1").returncode == 1
    assert cli(farm, "results", "1", "--format", "csv").returncode == 1
    assert cli(farm, "status").returncode == 0  # the overview judges no campaign
    before = {j.id: (j.device_key, j.state, j.attempt) for j in farm.jobs(1)}

    broken.kill()  # the device is fixed: the same key, no error
    start_agent("b", ["noop:good?delay_s=0.2", "noop:bad"], farm.db_url, farm.broker_url)
    done = cli(farm, "rerun", "1")
    assert done.returncode == 0, done.stderr
    failed_ids = [i for i, (_, state, _) in before.items() if state == "failed"]
    assert f"re-queued job {failed_ids[0]}:" in done.stdout and "1 job(s) re-queued" in done.stdout
    after = {j.id: j for j in farm.wait_done(1)}
    assert set(after) == set(before)  # the same jobs, no new campaign
    for jid, (key, state, attempt) in before.items():
        assert after[jid].device_key == key  # the same cell
        if state == "failed":
            assert after[jid].state == "succeeded" and after[jid].attempt == attempt + 1
        else:
            assert (after[jid].state, after[jid].attempt) == (state, attempt)
    with farm.engine.begin() as conn:
        kept = conn.execute(select(Attempt.outcome).where(Attempt.job_id == failed_ids[0])).all()
        assert [k.outcome for k in kept] == ["failed"]  # the first attempt's end is kept
    assert cli(farm, "status", "1").returncode == 0
    assert "nothing to re-run" in cli(farm, "rerun", "1").stdout


def test_rerun_of_an_unknown_campaign_exits_1(farm) -> None:
    done = cli(farm, "rerun", "999")
    assert done.returncode == 1 and "no campaign 999" in done.stderr


def example(path: Path, size: int) -> Path:
    made = subprocess.run(
        [sys.executable, "-m", "devicefarm.cli", "example", str(path), "--size", str(size)],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert made.returncode == 0, made.stderr
    return path


def test_a_lineage_belongs_to_its_project(farm, start_agent, tmp_path) -> None:
    """Another team's model of the same name is another lineage: a slower `net` of
    project b is judged against nothing, not against project a's history."""
    cpu = f"cpu:reference:{host_name()}"
    start_agent("a", ["cpu"], farm.db_url, farm.broker_url, ready=[cpu])
    fast = example(tmp_path / "net_a.tflite", 64)
    slow = example(tmp_path / "net_b.tflite", 160)
    common = ["--devices", f"key={cpu}", "--configs", "cpu", "--runs", "5", "--wait"]
    first = cli(farm, "submit", str(fast), "--name", "net", "--project", "a", *common)
    assert first.returncode == 0, first.stdout + first.stderr
    other = cli(farm, "submit", str(slow), "--name", "net", "--project", "b", *common)
    assert other.returncode == 0, other.stdout + other.stderr
    assert "regressions (0 of 0 judged" in other.stdout, other.stdout


def newest_campaign(farm) -> int:
    with farm.engine.begin() as conn:
        return conn.execute(select(func.max(Campaign.id))).scalar_one()


def confirmations_of(farm, campaign: int) -> list[int]:
    """The confirmation campaigns started for `campaign`'s suspects (found by their
    settings, not by number: a busy host's noise can make a history run suspect too)."""
    with farm.engine.begin() as conn:
        rows = conn.execute(select(Campaign.id, Campaign.settings).order_by(Campaign.id)).all()
    return [cid for cid, settings in rows if (settings or {}).get(CONFIRMS_CAMPAIGN) == campaign]


def confirmation_jobs(farm, campaign: int) -> list:
    """The jobs of a confirmation campaign, in the order they ran."""
    jobs = farm.jobs(campaign)
    assert all(j.state == "succeeded" for j in jobs)
    return sorted(jobs, key=lambda j: j.started_at)


def test_a_slowed_model_of_the_same_name_regresses(farm, start_agent, tmp_path) -> None:
    cpu = f"cpu:reference:{host_name()}"
    start_agent("a", ["cpu"], farm.db_url, farm.broker_url, ready=[cpu])
    fast = example(tmp_path / "net_v1.tflite", 64)
    slow = example(tmp_path / "net_v2.tflite", 160)  # v2 does ~6x the work of v1
    common = ["--devices", f"key={cpu}", "--configs", "cpu", "--runs", "20", "--wait"]
    first = cli(farm, "submit", str(fast), "--name", "net", *common)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "regressions (0 of 0 judged" in first.stdout  # nothing before it

    report = tmp_path / "junit.xml"
    second = cli(farm, "submit", str(slow), "--name", "net", *common, "--junit", str(report))
    out = second.stdout + second.stderr
    assert second.returncode == 3, out
    assert "regressions (1 of 1 judged, 1 suspect" in out
    assert f"suspect: net {cpu} cpu: fastest run" in out
    assert "(the median of 1 run(s); noise ±10.0%, a prior" in out
    assert f"net {cpu} cpu: regressed, confirmed\n" in out
    assert "confirmation campaign 3: 3 pairs of version " in out
    assert junit_counts(report) == (1, 1, ["regression"])
    # the confirmation's lines tell its two versions apart
    assert re.search(rf"^\[1/6\] net@[0-9a-f]{{10}} {cpu} cpu: succeeded", out, re.M), out
    # the verdict stays with the campaign: `status` and `results` show the regression
    listed = cli(farm, "status")
    assert re.search(r"^campaign 2 .*gate: regressed \(exit 3\)$", listed.stdout, re.M)
    for args in (["status", "2"], ["results", "2"]):
        shown = cli(farm, *args)
        assert shown.returncode == 0 and "regressed, confirmed" in shown.stdout, shown.stdout
    # the confirmation ran v1 and v2 in pairs taking turns first, on the suspect's device
    with farm.engine.begin() as conn:
        shas = dict(conn.execute(select(Job.campaign_id, Job.model_sha256)).all())
    ran = confirmation_jobs(farm, 3)
    v1, v2 = shas[1], shas[2]
    assert [j.model_sha256 for j in ran] == [v1, v2, v2, v1, v1, v2]
    assert {(j.device_key, j.config, j.model_name) for j in ran} == {(cpu, "cpu", "net")}
    ratios = re.search(r"candidate/baseline ([\d. ]+) \(", out)[1].split()
    assert len(ratios) == 3 and all(float(r) > 2 for r in ratios)

    # a named baseline (the newest other campaign of that name: 2, the slow version): the
    # fast version against it is no regression; without --name a file starts its own history
    third = cli(farm, "submit", str(fast), "--name", "net", *common, "--baseline", "net")
    assert third.returncode == 0, third.stdout + third.stderr
    assert "baseline: campaign 2" in third.stdout and "regressions (0 of 1 judged" in third.stdout
    other = cli(farm, "submit", str(slow), *common)
    assert other.returncode == 0 and "regressions (0 of 0 judged" in other.stdout


def test_a_suspect_its_confirmation_clears_passes(farm, start_agent, tmp_path) -> None:
    """An unchanged model against a history measured faster (a quieter day: the stored runs
    scaled by 0.3) is suspect; its paired runs against that same version clear it. (At 0.7 a
    busy CI host's own swing of the fastest run between campaigns once cleared the screen,
    and at 0.5 twice on a slower 2-core machine under the suite's load: the gap must stay
    well past what a 3-run history's prior noise asks for.)"""
    cpu = f"cpu:reference:{host_name()}"
    start_agent("a", ["cpu"], farm.db_url, farm.broker_url, ready=[cpu])
    model = example(tmp_path / "seg.tflite", 64)
    common = ["--devices", f"key={cpu}", "--configs", "cpu", "--runs", "20", "--wait"]
    for _ in range(3):
        done = cli(farm, "submit", str(model), "--name", "seg", *common)
        assert done.returncode == 0, done.stdout + done.stderr
    scaled: set[int] = set()

    def make_history_quieter() -> None:
        """Every stored run not yet scaled, scaled by 0.5."""
        with farm.engine.begin() as conn:
            for rid, bench in conn.execute(select(Result.id, Result.benchmark)).all():
                if rid in scaled:
                    continue
                quieter = {k: [v * 0.3 for v in bench[k]] if k == "runs_us" else bench[k] * 0.3
                           for k in ("runs_us", "min_us")}  # fmt: skip
                conn.execute(
                    update(Result).where(Result.id == rid).values(benchmark=bench | quieter)
                )
                scaled.add(rid)

    make_history_quieter()
    report = tmp_path / "junit.xml"
    again = cli(farm, "submit", str(model), "--name", "seg", *common, "--junit", str(report))
    out = again.stdout + again.stderr
    assert again.returncode == 0, out
    assert "regressions (0 of 1 judged, 1 suspect" in out and "suspect, cleared" in out
    change = re.search(r"fastest run [\d.]+ ms, \+(\d+\.\d)% against", out)
    assert change and float(change.group(1)) >= 30.0, out
    suspect = newest_campaign(farm) - 1  # its confirmation was created after it
    (confirmation,) = confirmations_of(farm, suspect)
    ran = confirmation_jobs(farm, confirmation)
    # B and C: one version
    assert len(ran) == 6 and len({j.model_sha256 for j in ran}) == 1, (ran, out)
    assert junit_counts(report) == (1, 0, [])

    # without confirmation the same kind of suspect fails the build (the history, now
    # holding the cleared run and its confirmation's, made uniformly quieter again: a busy
    # host's spread between them once widened the noise prior past the gap)
    make_history_quieter()
    off = cli(farm, "submit", str(model), "--name", "seg", *common, "--confirm-pairs", "0")
    assert off.returncode == 3, off.stdout + off.stderr
    assert "regressed (not confirmed: confirmation is off)" in off.stdout
    assert confirmations_of(farm, newest_campaign(farm)) == []  # and it ran no confirmation


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path) -> Iterator[str]:
    """A database no migration has touched, on each backend the farm runs on."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    from sqlalchemy import create_engine, text

    admin = create_engine(
        PG_ADMIN_URL.replace("postgresql://", "postgresql+psycopg2://", 1),
        isolation_level="AUTOCOMMIT",
    )
    name = f"devicefarm_lineage_{os.getpid()}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - reported as a missing service
        require(False, f"PostgreSQL at {PG_ADMIN_URL} ({exc})")
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def test_migration_0004_names_existing_jobs_after_their_model(empty_db: str) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import insert

    from farm_core.database import MIGRATIONS_DIR, make_engine
    from farm_core.schema import Base, Device, StoredModel

    engine = make_engine(empty_db)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))

    def upgrade(to: str) -> None:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, to)

    upgrade("0003")
    with engine.begin() as conn:  # a farm's rows from before lineages (0003's columns)
        conn.execute(insert(StoredModel).values(sha256="a" * 64, name="old.tflite", size_bytes=1,
                                                op_summary={}, data=b"x"))  # fmt: skip
        conn.execute(insert(Device).values(key="noop:a", kind="noop"))
        conn.execute(text_insert_campaign())
        conn.execute(text_insert_job(), {"m": "a" * 64})
    upgrade("head")
    with engine.begin() as conn:
        assert conn.execute(select(Job.model_name)).scalars().all() == ["old.tflite"]
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    if engine.dialect.name == "sqlite":  # SQLite's reflection drops an index column's DESC:
        diffs = [d for d in diffs if "ix_jobs_device_queue" not in repr(d)]  # PostgreSQL checks it
    assert [d for d in diffs if "jobs" in repr(d)] == []  # the migration makes the schema
    engine.dispose()


def text_insert_campaign():
    """An INSERT of the columns campaigns had at 0003 (the ORM's now include project)."""
    from sqlalchemy import text

    return text(
        "INSERT INTO campaigns (name, selector, configs, models, settings, priority, cancelled, "
        "created_at) VALUES ('', 'all', '[]', '[]', '{}', 0, false, CURRENT_TIMESTAMP)"
    )


def text_insert_job():
    """An INSERT of the columns jobs had at 0003 (the ORM's now include model_name)."""
    from sqlalchemy import text

    return text(
        "INSERT INTO jobs (campaign_id, model_sha256, config, planned_device, device_key, "
        "state, attempt, failures, priority, worker, reason, created_at, updated_at) "
        "VALUES (1, :m, 'cpu', 'noop:a', 'noop:a', 'succeeded', 1, 0, 0, '', '', "
        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
    )
