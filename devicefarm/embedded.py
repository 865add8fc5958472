"""The embedded default: the whole farm on one machine with no server.

A SQLite file and kombu's filesystem broker under DEVICEFARM_HOME (./.devicefarm), a local
agent with its consumer processes, and the reconciler in this process: the same tasks and
code paths as the distributed mode. Progress is printed as jobs finish, then the
per-device, per-configuration comparison table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select

from farm_core.celery_app import queue_for
from farm_core.configs import DEFAULT_CONFIGS
from farm_core.database import open_database
from farm_core.dispatch import CeleryDispatcher
from farm_core.schema import TERMINAL_STATES, Job
from farm_core.settings import Timing, default_broker_url, default_db_url, home
from orchestrator.probes import probe_for
from orchestrator.reconciler import reconcile
from orchestrator.report import campaign_rows, format_table
from orchestrator.submit import RunSettings, SubmissionError, read_models, submit

#: How often progress is polled and the reconciler runs.
POLL_S = 0.25
RECONCILE_EVERY_S = 2.0
#: How often a running job's progress is shown (its runner writes a line as often).
RUNNING_EVERY_S = 10.0


@dataclass
class LocalRun:
    campaign_id: int
    rows: list[dict]
    ok: bool


def _key_selector(keys: Sequence[str]) -> str:
    return "key=" + "|".join(sorted(keys))


def _job_seconds(row) -> float | None:
    """How long the job itself ran (claimed to finished), when both are known."""
    if row.started_at is None or row.finished_at is None:
        return None
    return (row.finished_at - row.started_at).total_seconds()


def _progress_line(done: int, total: int, row, elapsed_s: float) -> str:
    """`[3/6] cpu:ref gpu-fp32: succeeded avg 1.234 ms, took 4.2 s (t+9.4 s)`: t+ is the
    time since the campaign started, `took` the job's own run."""
    figure = f"avg {row.avg_us / 1000:.3f} ms" if row.avg_us is not None else ""
    why = (row.reason or "").splitlines()[0][:100] if row.state != "succeeded" else ""
    took = _job_seconds(row)
    parts = [x for x in (figure or why, f"took {took:.1f} s" if took is not None else "") if x]
    detail = f" {', '.join(parts)}" if parts else ""
    return (
        f"[{done}/{total}] {row.device_key} {row.config}: {row.state}{detail} (t+{elapsed_s:.1f} s)"
    )


def _running_line(row, progress: str | None, elapsed_s: float) -> str:
    """`  cpu:ref cpu: running, benchmark: 12/50 runs, 3.31 s/run, 40 s (t+52.0 s)`."""
    return f"  {row.device_key} {row.config}: running, {progress} (t+{elapsed_s:.1f} s)"


def _waiting_line(row, elapsed_s: float) -> str:
    """`  android:X cpu: waiting for a matching device ... (t+9.4 s)`."""
    why = (row.reason or "").splitlines()[0][:160]
    return (
        f"  {row.device_key} {row.config}: {why}; it stays queued until a device of the same "
        f"hardware is online (Ctrl-C leaves it queued) (t+{elapsed_s:.1f} s)"
    )


def wait_for_campaign(
    engine: Engine,
    campaign_id: int,
    say: Callable[[str], None],
    reconcile_pass: Callable,
    timeout_s: float | None = None,
    progress_of: Callable[[str, int], str | None] | None = None,
) -> None:
    """Print each job as it ends, and every RUNNING_EVERY_S the newest progress line
    (`progress_of(device_key, job_id)`) of jobs still running; run the reconciler
    meanwhile; return when all ended."""
    from farm_core.jobs import WAITING
    from farm_core.schema import RUNNING, Result

    start = time.monotonic()
    seen: set[int] = set()
    shown: dict[int, str] = {}  # job -> its progress line last shown
    last_reconcile = last_running = start
    while True:
        with engine.begin() as conn:
            rows = conn.execute(
                select(
                    Job.id,
                    Job.state,
                    Job.device_key,
                    Job.config,
                    Job.reason,
                    Job.started_at,
                    Job.finished_at,
                    Result.avg_us,
                )
                .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
                .where(Job.campaign_id == campaign_id)
                .order_by(Job.id)
            ).all()
        for r in rows:
            if r.state in TERMINAL_STATES and r.id not in seen:
                seen.add(r.id)
                say(_progress_line(len(seen), len(rows), r, time.monotonic() - start))
            elif (r.reason or "").endswith(WAITING) and shown.get(r.id) != r.reason:
                shown[r.id] = r.reason
                say(_waiting_line(r, time.monotonic() - start))
        if len(seen) == len(rows):
            return
        now = time.monotonic()
        if progress_of is not None and now - last_running >= RUNNING_EVERY_S:
            last_running = now
            for r in rows:
                line = progress_of(r.device_key, r.id) if r.state == RUNNING else None
                if line and shown.get(r.id) != line:
                    shown[r.id] = line
                    say(_running_line(r, line, now - start))
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
    from worker_agent.runners.job_progress import latest_line

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
                progress_of=lambda key, job: latest_line(log_dir / f"{queue_for(key)}.log", job),
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
