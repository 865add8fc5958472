"""The embedded default: the whole farm on one machine with no server.

A SQLite file and kombu's filesystem broker in the farm's home (settings.home()), a local
agent with its consumer processes, and the reconciler in this process: the same tasks and
code paths as the distributed mode. Progress is printed as jobs run and finish (from the
database, as in the distributed mode), then the per-device, per-configuration comparison
table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select

from farm_core.configs import DEFAULT_CONFIGS
from farm_core.database import open_database
from farm_core.dispatch import CeleryDispatcher
from farm_core.schema import Job
from farm_core.settings import Timing, default_broker_url, default_db_url, home
from orchestrator.probes import probe_for
from orchestrator.reconciler import reconcile
from orchestrator.report import campaign_rows, format_table
from orchestrator.submit import RunSettings, SubmissionError, read_models, submit

from .wait_lines import CampaignLines, JobView

#: How often progress is polled and the reconciler runs.
POLL_S = 0.25
RECONCILE_EVERY_S = 2.0


@dataclass
class LocalRun:
    campaign_id: int
    rows: list[dict]
    ok: bool


def _key_selector(keys: Sequence[str]) -> str:
    return "key=" + "|".join(sorted(keys))


def _jobs(engine: Engine, campaign_id: int) -> list[JobView]:
    """The campaign's jobs as a wait shows them."""
    from farm_core.schema import Result, StoredModel

    with engine.begin() as conn:
        rows = conn.execute(
            select(
                Job.id,
                Job.state,
                Job.device_key,
                Job.config,
                Job.reason,
                Job.progress,
                Job.model_sha256,
                Job.model_name,
                StoredModel.name,
                Job.started_at,
                Job.finished_at,
                Result.avg_us,
            )
            .join(StoredModel, StoredModel.sha256 == Job.model_sha256)
            .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
            .where(Job.campaign_id == campaign_id)
            .order_by(Job.id)
        ).all()
    return [
        JobView(
            r.id,
            r.model_sha256,
            r.model_name or r.name,
            r.device_key,
            r.config,
            r.state,
            r.reason or "",
            r.progress or "",
            None if r.avg_us is None else r.avg_us / 1000,
            (r.finished_at - r.started_at).total_seconds()
            if r.started_at is not None and r.finished_at is not None
            else None,
        )
        for r in rows
    ]


def wait_for_campaign(
    engine: Engine,
    campaign_id: int,
    say: Callable[[str], None],
    reconcile_pass: Callable,
    timeout_s: float | None = None,
) -> None:
    """Print each job as it ends, a running job's progress as its worker stores it
    (`jobs.progress`) and a job waiting for a device (wait_lines.CampaignLines); run the
    reconciler meanwhile; return when all ended (TimeoutError after `timeout_s`)."""
    start = time.monotonic()
    lines = CampaignLines()
    last_reconcile = start
    while True:
        jobs = _jobs(engine, campaign_id)
        now = time.monotonic()
        for line in lines.update(jobs, now - start):
            say(line)
        if lines.done(jobs):
            return
        if now - last_reconcile >= RECONCILE_EVERY_S:
            reconcile_pass()
            last_reconcile = now
        if timeout_s is not None and now - start > timeout_s:
            raise TimeoutError(f"campaign {campaign_id} did not finish in {timeout_s:g} s")
        time.sleep(POLL_S)


def run_local(
    models: Sequence[str | os.PathLike],
    device_specs: Sequence[str] | None = None,
    configs: Sequence[str] | None = None,
    settings: RunSettings | None = None,
    db_url: str | None = None,
    broker_url: str | None = None,
    say: Callable[[str], None] = print,
    timeout_s: float | None = None,
    inputs: Sequence[str] = (),
    model_name: str = "",
    pin_cpus: bool | None = None,
) -> LocalRun:
    """Run models on this machine's devices through the farm's own path; returns results.
    `inputs`: the user's input values (`LAYER:SHAPE:FILE` or an .npz), as submit takes;
    `model_name`: the model's lineage name, as submit takes; `pin_cpus`: each device's
    consumer on CPUs of its own (default: $DEVICEFARM_PIN_CPUS; worker_agent/cpu_sets.py)."""
    from worker_agent.agent import Agent
    from worker_agent.discovery import discover

    db_url = db_url or default_db_url()
    broker_url = broker_url or default_broker_url()
    timing = Timing.from_env()
    log_dir = home() / "logs"
    errors: list[str] = []
    read_models(models, errors)  # fail fast, before devices are started and checked
    if errors:
        raise SubmissionError(errors)
    engine = open_database(db_url)
    devices = discover(device_specs)
    say(f"devices: {', '.join(d.key for d in devices) or 'none'}")
    agent = Agent(
        db_url,
        broker_url,
        devices,
        name=f"embedded:{os.getpid()}",
        timing=timing,
        say=say,
        log_dir=log_dir,
        pin_cpus=pin_cpus,
    )
    dispatcher = CeleryDispatcher(broker_url)
    probe = probe_for(broker_url)
    agent.register()
    agent.start_heartbeats()  # the canaries may take longer than offline_after_s
    try:
        agent.check_all()
        sub = submit(
            engine,
            dispatcher,
            models,
            _key_selector(agent.devices),
            list(configs or DEFAULT_CONFIGS),
            settings or RunSettings(),
            timing=timing,
            drop_unrun_configs=configs is None,
            inputs=inputs,
            name=model_name,
            model_name=model_name,
        )
        for w in sub.warnings:
            say(f"note: {w}")
        say(f"campaign {sub.campaign_id}: {sub.jobs} jobs on {len(sub.devices)} device(s)")
        agent.start(canary=False)
        try:
            wait_for_campaign(
                engine,
                sub.campaign_id,
                say,
                lambda: reconcile(engine, dispatcher, probe, timing),
                timeout_s,
            )
        except BaseException:
            from farm_core.jobs import cancel

            with engine.begin() as conn:
                cancel(conn, sub.campaign_id)
            raise
    finally:
        agent.stop()  # heartbeats run from registration on
        dispatcher.close()
    rows = campaign_rows(engine, sub.campaign_id)
    say("")
    say(format_table(rows))
    return LocalRun(sub.campaign_id, rows, all(r["state"] == "succeeded" for r in rows))
