"""The gate on a SQLite farm (no services): a cell's history is read by configuration record,
confirmation campaigns run baseline and candidate alternately and stay out of every
history, and the exit code follows the confirmation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, select

from farm_core import jobs
from farm_core.schema import Campaign, Job
from orchestrator import confirm, gate, history
from orchestrator.submit import RunSettings, submit
from tests.support.farm import RecordingDispatcher, add_device, sqlite_engine, write_model

DEVICE = "cpu:reference:test"


@pytest.fixture
def farm(tmp_path: Path) -> Engine:
    engine = sqlite_engine(tmp_path)
    add_device(engine, DEVICE, kind="cpu")
    return engine


def run(engine: Engine, model: Path, fastest_us: float, fingerprint: str = "fp1") -> int:
    """A campaign of `model` under the name "net", its one job succeeded with runs whose
    fastest is `fastest_us` (the rest 3x slower: a busy host)."""
    sub = submit(engine, RecordingDispatcher(), [model], f"key={DEVICE}", "cpu",
                 RunSettings(num_runs=5, diff_runs=0), model_name="net")  # fmt: skip
    with engine.begin() as conn:
        (job,) = conn.execute(select(Job.id).where(Job.campaign_id == sub.campaign_id)).scalars()
    finish(engine, job, fastest_us, fingerprint)
    return sub.campaign_id


def finish(engine: Engine, job: int, fastest_us: float, fingerprint: str = "fp1") -> None:
    runs = [fastest_us * 3, fastest_us, fastest_us * 2.5, fastest_us * 3.5]
    result = {"benchmark": {"runs_us": runs, "min_us": fastest_us},
              "median_us": float(np.median(runs)), "avg_us": float(np.mean(runs)),
              "config_fingerprint": fingerprint}  # fmt: skip
    with engine.begin() as conn:
        assert jobs.claim(conn, job, 1, "w", 60.0) is not None
        assert jobs.finish(conn, job, 1, "w", "succeeded", result)


def only_job(engine: Engine, campaign: int) -> int:
    with engine.begin() as conn:
        return conn.execute(select(Job.id).where(Job.campaign_id == campaign)).scalar_one()


def history_of(engine: Engine, fastest: list[float], model: Path) -> list[int]:
    return [run(engine, model, us) for us in fastest]


@pytest.fixture
def models(tmp_path: Path) -> tuple[Path, Path]:
    return write_model(tmp_path / "v1.tflite", 1.0), write_model(tmp_path / "v2.tflite", 2.0)


def test_different_configuration_records_are_never_compared(farm, models) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    other = run(farm, v2, 2000.0, fingerprint="fp2")  # 2x slower, another record
    [cell] = gate.evaluate(farm, other).cells
    assert cell.verdict is not None and not cell.verdict.judged and not cell.suspect
    same = run(farm, v2, 2000.0)
    [cell] = gate.evaluate(farm, same).cells
    assert cell.verdict.judged and cell.suspect
    assert cell.verdict.noise.runs == 6  # the fp2 run is no part of fp1's history


def test_a_suspect_needs_its_confirmation_and_the_pairs_alternate(farm, models) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    candidate = run(farm, v2, 1200.0)
    report = gate.evaluate(farm, candidate)
    [cell] = report.cells
    assert cell.suspect and cell.pending and report.exit_code == gate.EXIT_FAILED
    assert "awaiting confirmation" in "\n".join(gate.summary_lines(report))
    assert gate.evaluate(farm, candidate, confirm=False).exit_code == gate.EXIT_REGRESSED

    sent = RecordingDispatcher()
    [cid] = gate.confirm_pending(farm, sent, report, pairs=3)
    with farm.begin() as conn:
        rows = conn.execute(
            select(Job.id, Job.model_sha256, Job.device_key, Job.config, Job.model_name)
            .where(Job.campaign_id == cid)
            .order_by(Job.id)
        ).all()
        settings = conn.execute(select(Campaign.settings).where(Campaign.id == cid)).scalar_one()
    shas = [r.model_sha256 for r in rows]
    base, new = cell.verdict.baseline_sha256, shas[1]
    assert base != new and shas == [base, new, new, base, base, new]  # pairs take turns first
    assert {(r.device_key, r.config, r.model_name) for r in rows} == {(DEVICE, "cpu", "net")}
    assert [o.job_id for o in sent.sent] == [r.id for r in rows]  # sent in that order
    assert settings["num_runs"] == 5 and settings[history.CONFIRMS_JOB] == cell.job

    running = gate.evaluate(farm, candidate)
    assert running.cells[0].pending and running.cells[0].confirmation.state == confirm.RUNNING
    assert gate.confirm_pending(farm, sent, running, pairs=3) == [cid]  # not a second one
    for r, us in zip(rows, [1000, 1150, 1190, 1010, 990, 1180], strict=True):
        finish(farm, r.id, us)
    report = gate.evaluate(farm, candidate)
    [cell] = report.cells
    assert cell.regressed and report.exit_code == gate.EXIT_REGRESSED
    assert cell.confirmation.ratios == pytest.approx((1.15, 1190 / 1010, 1180 / 990))
    text = "\n".join(gate.summary_lines(report))
    assert "regressed, confirmed" in text and "candidate/baseline 1.150 1.178 1.192" in text


def test_a_suspect_its_pairs_clear_passes(farm, models) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    candidate = run(farm, v2, 1200.0)  # a slow run of a model no slower than v1
    [cid] = gate.confirm_pending(farm, RecordingDispatcher(), gate.evaluate(farm, candidate), 3)
    for job, us in zip(jobs_of(farm, cid), [1000, 990, 1010, 1030, 995, 1001], strict=True):
        finish(farm, job, us)
    report = gate.evaluate(farm, candidate)
    assert report.exit_code == gate.EXIT_OK and report.cells[0].suspect
    assert report.cells[0].confirmation.state == confirm.CLEARED
    assert "suspect, cleared" in "\n".join(gate.summary_lines(report))


def test_a_host_growing_busier_does_not_confirm_a_regression(farm, models) -> None:
    """Every job 10% slower than the one before it (a CI host filling up): with the baseline
    first in every pair the candidate would be slower in every pair; taking turns clears it."""
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    candidate = run(farm, v2, 1200.0)
    [cid] = gate.confirm_pending(farm, RecordingDispatcher(), gate.evaluate(farm, candidate), 3)
    for n, job in enumerate(jobs_of(farm, cid)):
        finish(farm, job, 1000.0 * 1.1**n)
    [cell] = gate.evaluate(farm, candidate).cells
    assert cell.confirmation.ratios == pytest.approx((1.1, 1 / 1.1, 1.1))
    assert cell.confirmation.state == confirm.CLEARED, cell.confirmation.why


def test_pairs_under_two_configuration_records_leave_it_undecided(farm, models) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    candidate = run(farm, v2, 1200.0)
    [cid] = gate.confirm_pending(farm, RecordingDispatcher(), gate.evaluate(farm, candidate), 2)
    for job, fp in zip(jobs_of(farm, cid), ["fp1", "fp1", "fp1", "fp9"], strict=True):
        finish(farm, job, 1000.0 if fp == "fp1" else 2000.0, fp)
    report = gate.evaluate(farm, candidate)
    assert report.cells[0].confirmation.state == confirm.FAILED
    assert report.exit_code == gate.EXIT_FAILED and report.undecided


def test_confirmations_stay_out_of_history_and_a_confirmed_regression_too(farm, models) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    first = run(farm, v2, 1300.0)
    [cid] = gate.confirm_pending(farm, RecordingDispatcher(), gate.evaluate(farm, first), 3)
    for job, us in zip(jobs_of(farm, cid), [1000, 1300, 1300, 1000, 1000, 1300], strict=True):
        finish(farm, job, us)
    assert gate.evaluate(farm, first).exit_code == gate.EXIT_REGRESSED
    again = run(farm, v2, 1300.0)  # resubmitted unchanged
    [cell] = gate.evaluate(farm, again).cells
    assert cell.suspect and cell.verdict.noise.runs == 6  # nor the confirmation's 6 runs
    assert cell.verdict.baseline_us == pytest.approx(1000.0)


def test_a_named_baseline_campaign_is_a_history_of_one(farm, models) -> None:
    v1, v2 = models
    base = run(farm, v1, 1000.0)
    [cell] = gate.evaluate(farm, run(farm, v2, 1150.0), baseline=str(base)).cells
    assert cell.verdict.noise.prior and not cell.suspect  # +15% < 2 x the 10% prior
    [cell] = gate.evaluate(farm, run(farm, v2, 1500.0), baseline=str(base)).cells
    assert cell.suspect and cell.baseline_campaign == base


def jobs_of(engine: Engine, campaign: int) -> list[int]:
    with engine.begin() as conn:
        return list(
            conn.execute(
                select(Job.id).where(Job.campaign_id == campaign).order_by(Job.id)
            ).scalars()
        )


def test_a_confirmation_against_another_version_is_not_reused(farm, models, tmp_path) -> None:
    v1, v2 = models
    history_of(farm, [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0], v1)
    candidate = run(farm, v2, 1300.0)
    [cid] = gate.confirm_pending(farm, RecordingDispatcher(), gate.evaluate(farm, candidate), 1)
    for job, us in zip(jobs_of(farm, cid), [1000, 1300], strict=True):
        finish(farm, job, us)
    assert gate.evaluate(farm, candidate).cells[0].regressed
    v0 = run(farm, write_model(tmp_path / "v0.tflite", 3.0), 900.0)  # another version
    [cell] = gate.evaluate(farm, candidate, baseline=str(v0)).cells
    assert cell.suspect and cell.pending and cell.confirmation is None
