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

from .configs import DEFAULT_CONFIGS
from .database import open_database
from .dispatch import CeleryDispatcher
from .probes import probe_for
from .reconciler import reconcile
from .report import campaign_rows, format_table
from .schema import TERMINAL_STATES, Job
from .settings import Timing, default_broker_url, default_db_url, home
from .submit import RunSettings, SubmissionError, read_models, submit

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


def _progress_line(done: int, total: int, row, elapsed_s: float) -> str:
    figure = f"avg {row.avg_us / 1000:.3f} ms" if row.avg_us is not None else ""
    why = (row.reason or "").splitlines()[0][:100] if row.state != "succeeded" else ""
    return (
        f"[{done}/{total}] {row.device_key} {row.config}: {row.state} "
        f"{figure or why} ({elapsed_s:.1f} s)"
    ).rstrip()


def wait_for_campaign(
    engine: Engine,
    campaign_id: int,
    say: Callable[[str], None],
    reconcile_pass: Callable,
    timeout_s: float | None = None,
) -> None:
    """Print each job as it ends; run the reconciler meanwhile; return when all ended."""
    from .schema import Result

    start = time.monotonic()
    seen: set[int] = set()
    last_reconcile = start
    while True:
        with engine.begin() as conn:
            rows = conn.execute(
                select(Job.id, Job.state, Job.device_key, Job.config, Job.reason, Result.avg_us)
                .outerjoin(Result, (Result.job_id == Job.id) & (Result.attempt == Job.attempt))
                .where(Job.campaign_id == campaign_id)
                .order_by(Job.id)
            ).all()
        for r in rows:
            if r.state in TERMINAL_STATES and r.id not in seen:
                seen.add(r.id)
                say(_progress_line(len(seen), len(rows), r, time.monotonic() - start))
        if len(seen) == len(rows):
            return
        now = time.monotonic()
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
) -> LocalRun:
    """Run models on this machine's devices through the farm's own path; returns results."""
    from worker_agent.agent import Agent
    from worker_agent.discovery import discover

    db_url = db_url or default_db_url()
    broker_url = broker_url or default_broker_url()
    timing = Timing.from_env()
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
        log_dir=home() / "logs",
    )
    agent.register()
    agent.check_all()
    dispatcher = CeleryDispatcher(broker_url)
    probe = probe_for(broker_url)
    try:
        sub = submit(
            engine,
            dispatcher,
            models,
            _key_selector(agent.devices),
            list(configs or DEFAULT_CONFIGS),
            settings or RunSettings(),
            timing=timing,
            drop_unrun_configs=configs is None,
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
            from .jobs import cancel

            with engine.begin() as conn:
                cancel(conn, sub.campaign_id)
            raise
        finally:
            agent.stop()
    finally:
        dispatcher.close()
    rows = campaign_rows(engine, sub.campaign_id)
    say("")
    say(format_table(rows))
    return LocalRun(sub.campaign_id, rows, all(r["state"] == "succeeded" for r in rows))
