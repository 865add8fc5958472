"""Confirming a suspect regression with paired runs on its own device.

A suspect (orchestrator.history) fails a build only when interleaved runs agree. A
confirmation campaign runs the baseline's version (B) and the candidate (C) in pairs on the
suspect's device, in its configuration, with its campaign's run settings, so that each pair
sees the same host (FAI-PEP's control and treatment). The pairs take turns going first,
B C, C B, B C (counterbalanced, as ABBA designs are): on a host that grows busier during the
confirmation the later job of every pair is slower, and a fixed order would blame that on
the candidate in every pair (a busy CI host once confirmed an unchanged model so, with
candidate/baseline 1.024 1.068 1.442). Each pair gives the
ratio of the candidate's figure to the baseline's (history.figure: the fastest run), and
the regression is confirmed when
- the median ratio exceeds 1 + the bar: the threshold, or the cell's run-to-run noise where
  that is larger (`bar`; a pair's ratio within the noise its history shows is no evidence,
  and that CI run's median was +6.8% against a noise of ±10%), and
- the candidate is slower in every pair.
An unchanged model (B and C the same sha256) is run the same way, and passes.

A confirmation's jobs are stored in that order (`pair_order`) and sent in order; its
campaign's settings name the job it confirms (`history.CONFIRMS_JOB`), which keeps its
results out of every cell's history, and keeps a confirmed regression out of its cell's
good history. A job that failed, or a pair measured under two
configuration records, leaves the confirmation undecided: the gate fails as failed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, insert, select

from delegate_runtime.errors import JobError
from farm_core import jobs
from farm_core.dispatch import Dispatcher, SendOrder
from farm_core.schema import ACTIVE_STATES, QUEUED, SUCCEEDED, Campaign, Job, Result, utcnow

from .history import CONFIRMS_JOB, Noise, figure
from .regression import DEFAULT_THRESHOLD, SAMPLE_COLUMNS, sample_or_none

#: Baseline-candidate pairs a confirmation runs by default.
DEFAULT_PAIRS = 3
#: The settings key naming the campaign of the job a confirmation confirms.
CONFIRMS_CAMPAIGN = "confirms_campaign"
#: NOTE: kombu's filesystem broker orders messages by their millisecond, then by a random
#: uuid: sends this far apart keep B C C B in order.
SEND_GAP_S = 0.002

RUNNING, CONFIRMED, CLEARED, FAILED = "running", "confirmed", "cleared", "failed"


def baseline_first(pair: int) -> bool:
    """Whether pair number `pair` (from 0) runs the baseline first: every other pair."""
    return pair % 2 == 0


def bar(threshold: float, noise: Noise | None) -> float:
    """How far beyond 1 the median pair must be to confirm: the threshold, or the cell's
    noise (its relative standard deviation) where that is larger."""
    return max(threshold, noise.sigma) if noise is not None else threshold


def decide(ratios: Sequence[float], threshold: float = DEFAULT_THRESHOLD) -> tuple[bool, str]:
    """Whether pair ratios (candidate / baseline) confirm a regression, and why."""
    if not ratios:
        raise ValueError("no pairs to decide on")
    median = float(np.median(ratios)) - 1.0
    if median <= threshold:
        return False, f"the median pair is {median:+.1%}, within the {threshold:.1%} bar"
    faster = sum(r <= 1.0 for r in ratios)
    if faster:
        return False, f"the median pair is {median:+.1%}, but {faster} pair(s) were not slower"
    return True, f"slower in every pair, the median by {median:+.1%}"


@dataclass(frozen=True)
class Confirmation:
    """A confirmation campaign as it stands: its pairs' ratios (candidate / baseline) and
    its state: running, confirmed, cleared or failed (undecided)."""

    campaign: int
    pairs: int  #: planned
    ratios: tuple[float, ...]
    state: str
    why: str
    baseline_sha256: str = ""  #: the version it ran against the candidate

    @property
    def regressed(self) -> bool:
        return self.state == CONFIRMED

    @property
    def undecided(self) -> bool:
        return self.state in (RUNNING, FAILED)

    def describe(self, baseline_sha256: str = "") -> str:
        """`confirmation campaign 12: 3 pairs of version 1a2b3c4d5e and this one,
        taking turns first: candidate/baseline 1.120 1.090 1.150 (slower in every pair, ...)`."""
        ratios = " ".join(f"{r:.3f}" for r in self.ratios) or "none yet"
        version = f"version {baseline_sha256[:10]}" if baseline_sha256 else "the baseline"
        return (
            f"confirmation campaign {self.campaign}: {self.pairs} pairs of {version} and this "
            f"one, taking turns first: candidate/baseline {ratios} ({self.why})"
        )


def read(conn: Connection, campaign_id: int, threshold: float = DEFAULT_THRESHOLD) -> Confirmation:
    """A confirmation campaign's pairs and decision, from its jobs in order."""
    rows = (
        conn.execute(
            select(
                Job.id,
                Job.state,
                Job.model_sha256,
                Result.outcome,
                Result.config_fingerprint,
                *SAMPLE_COLUMNS,
            )
            .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
            .where(Job.campaign_id == campaign_id)
            .order_by(Job.id)
        )
        .mappings()
        .all()
    )
    pairs, base = len(rows) // 2, rows[0]["model_sha256"] if rows else ""

    def made(ratios: Sequence[float], state: str, why: str) -> Confirmation:
        return Confirmation(campaign_id, pairs, tuple(ratios), state, why, base)

    if any(r["state"] in ACTIVE_STATES for r in rows):
        done = sum(r["state"] not in ACTIVE_STATES for r in rows)
        return made((), RUNNING, f"{done} of {len(rows)} jobs done")
    failed = [r for r in rows if r["state"] != SUCCEEDED]
    if failed or not rows or len(rows) % 2:
        why = f"{len(failed)} of {len(rows)} jobs did not succeed" if failed else "no pairs"
        return made((), FAILED, why)
    ratios: list[float] = []
    for pair, (first, second) in enumerate(zip(rows[0::2], rows[1::2], strict=True)):
        b, c = (first, second) if baseline_first(pair) else (second, first)
        fb, fc = figure(sample_or_none(b)), figure(sample_or_none(c))
        if fb is None or fc is None:
            return made(ratios, FAILED, "a pair has no latency")
        if b["config_fingerprint"] != c["config_fingerprint"]:
            return made(ratios, FAILED, "a pair was measured under two configuration records")
        ratios.append(fc / fb)
    regressed, why = decide(ratios, threshold)
    return made(ratios, CONFIRMED if regressed else CLEARED, why)


def find(conn: Connection, job_id: int) -> int | None:
    """The newest confirmation campaign of a job, if any."""
    return newest(conn, [job_id]).get(job_id)


def newest(conn: Connection, job_ids: Sequence[int]) -> dict[int, int]:
    """Job id -> its newest confirmation campaign, for those of `job_ids` that have one."""
    if not job_ids:
        return {}
    confirms = Campaign.settings[CONFIRMS_JOB].as_integer()
    rows = conn.execute(
        select(confirms, Campaign.id).where(confirms.in_(list(job_ids))).order_by(Campaign.id)
    ).all()
    return {int(job): int(campaign) for job, campaign in rows}


def regressed_jobs(
    conn: Connection, job_ids: Sequence[int], threshold: float = DEFAULT_THRESHOLD
) -> set[int]:
    """Those of `job_ids` whose newest confirmation confirmed a regression."""
    return {
        job
        for job, campaign in newest(conn, job_ids).items()
        if read(conn, campaign, threshold).regressed
    }


def submit(
    engine: Engine,
    dispatcher: Dispatcher,
    job_id: int,
    baseline_sha256: str,
    pairs: int = DEFAULT_PAIRS,
) -> int:
    """Store and send a confirmation of job `job_id` against the version `baseline_sha256`:
    `pairs` pairs of jobs, B C, C B, B C, on the job's device and configuration;
    its campaign id."""
    if pairs < 1:
        raise JobError(f"a confirmation needs at least one pair, not {pairs}")
    now = utcnow()
    with engine.begin() as conn:
        job = conn.execute(
            select(
                Job.campaign_id,
                Job.model_sha256,
                Job.model_name,
                Job.device_key,
                Job.config,
                Job.priority,
                Campaign.settings,
                Campaign.project,
                Campaign.owner,
            )
            .join(Campaign, Campaign.id == Job.campaign_id)
            .where(Job.id == job_id)
        ).one_or_none()
        if job is None:
            raise JobError(f"no job {job_id} to confirm")
        settings = dict(job.settings) | {CONFIRMS_JOB: job_id, CONFIRMS_CAMPAIGN: job.campaign_id}
        campaign_id = conn.execute(
            insert(Campaign)
            .values(
                name=f"confirm job {job_id}: {job.model_name}"[:255],
                selector=f"key={job.device_key}",
                configs=[job.config],
                models=list(dict.fromkeys([baseline_sha256, job.model_sha256])),
                settings=settings,
                priority=job.priority,
                project=job.project,  # the confirmed campaign's: its owner can follow it
                owner=job.owner,
                created_at=now,
            )
            .returning(Campaign.id)
        ).scalar_one()
        ids = [
            conn.execute(
                insert(Job)
                .values(
                    campaign_id=campaign_id,
                    model_sha256=sha,
                    model_name=job.model_name,
                    config=job.config,
                    project=job.project,
                    planned_device=job.device_key,
                    device_key=job.device_key,
                    state=QUEUED,
                    attempt=1,
                    failures=0,
                    priority=job.priority,
                    worker="",
                    reason="",
                    created_at=now,
                    updated_at=now,
                )
                .returning(Job.id)
            ).scalar_one()
            for pair in range(pairs)
            for sha in (
                (baseline_sha256, job.model_sha256)
                if baseline_first(pair)
                else (job.model_sha256, baseline_sha256)
            )
        ]
    _send_in_order(engine, dispatcher, ids, job.device_key, job.priority, settings)
    return int(campaign_id)


def _send_in_order(
    engine: Engine,
    dispatcher: Dispatcher,
    ids: Sequence[int],
    device: str,
    priority: int,
    settings: dict,
) -> None:
    """Send the jobs one by one, in order; those the broker did not take stay queued for
    the reconciler."""
    soft = settings.get("soft_limit_s")
    hard = settings.get("hard_limit_s")
    for i, jid in enumerate(ids):
        if i:
            time.sleep(SEND_GAP_S)
        order = SendOrder(jid, 1, device, priority, soft_limit_s=soft, hard_limit_s=hard)
        sent, error = dispatcher.send([order])
        if error:
            return
        with engine.begin() as conn:
            jobs.mark_sent(conn, sent)
