"""One device's consumer: a Celery worker process on that device's queue, one job at a time.

The agent starts one per device: `python -m worker_agent.consumer --device JSON --db URL
--broker URL [--cpus LIST]`. With `--cpus` (the agent's `--pin-cpus`, cpu_sets.py) it
first confines itself to those CPUs, which its threads and pool child inherit. It installs
the device context, then runs a prefork worker with a single child (hard time limits need
the pool), prefetch 1 and acks_late, so a device never holds more than the job it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from farm_core.celery_app import configure, prepare_broker, queue_for
from farm_core.settings import Timing, home

from .devices import DeviceInfo, host_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupShared:
    """What the devices of one group process share (worker_agent.group): an engine for
    their transactions, one in autocommit whose small pool every device's statements
    borrow from, and one dispatcher."""

    engine: Engine
    dispatcher: Any
    statements_engine: Engine


@dataclass
class ConsumerContext:
    """What a job needs on the worker side: the device, its runner, the DB, the broker.

    With `group` set the device is one of a group process's, its jobs run on threads: it
    shares the group's engine and dispatcher, holds no connection of its own between
    statements, and runs without a per-job memory limit (a process-wide limit)."""

    device: DeviceInfo
    db_url: str
    broker_url: str
    worker: str  #: this consumer's identity (stable across its pool's child restarts)
    timing: Timing = field(default_factory=Timing.from_env)
    cache_dir: Path = field(default_factory=lambda: home() / "cache")
    campaign_settings: dict[int, dict[str, Any]] = field(default_factory=dict)
    jobs_since_canary: int = 0
    jobs_to_fill: int = 1  #: jobs to end before this consumer fills its queue again
    #: the device's other jobs out as its last finish counted them (None: not counted)
    others_out: int | None = None
    quarantined: bool = False
    short_jobs: int = 0  #: short jobs in a row (worker_agent.job_pace)
    group: GroupShared | None = None  #: set for a device served by a group process

    @property
    def threaded(self) -> bool:
        """Jobs run on threads of a group process (not in a process of the device's own)."""
        return self.group is not None

    @cached_property
    def engine(self) -> Engine:
        """Keeps no connection between uses: a device runs one job at a time, and what it
        does per job goes through `statements`. In a group: the group's engine."""
        if self.group is not None:
            return self.group.engine
        from farm_core.database import make_engine

        return make_engine(self.db_url, durable=False, pool=0)

    @cached_property
    def statements(self) -> Any:
        """The claim's, the lease's, the queue count's and the finish's connection
        (farm_core.database.Statements): the one this device holds while its queue has jobs;
        in a group, one borrowed from the group's pool per statement."""
        from farm_core.database import Statements

        if self.group is not None:
            return Statements(self.group.statements_engine, hold=False)
        return Statements(self.engine)

    def release_connection(self) -> None:
        """Close the device's connection (its queue ran dry; the next job opens another)."""
        if "statements" in self.__dict__:
            self.statements.close()

    @cached_property
    def facts(self) -> dict[str, Any]:
        """The device's facts as stored with each result."""
        return self.device.row()

    @cached_property
    def runner(self) -> Any:
        from .runners import make_runner

        runner = make_runner(self.device)
        runner.setup()
        return runner

    @cached_property
    def dispatcher(self) -> Any:
        if self.group is not None:
            return self.group.dispatcher
        from farm_core.dispatch import CeleryDispatcher

        return CeleryDispatcher(self.broker_url)

    @cached_property
    def lease(self) -> Any:
        from .lease import LeaseKeeper

        return LeaseKeeper(self.statements, self.worker, self.timing.lease_s, self.threaded)

    def back_in_service(self) -> None:
        """Start over as a new consumer of the device would once its canary passed again
        (a group's device resumed): not quarantined, counts reset, its runner set up anew
        at the next job."""
        self.quarantined = False
        self.jobs_since_canary = 0
        self.jobs_to_fill = 1
        self.short_jobs = 0
        runner = self.__dict__.pop("runner", None)
        if runner is not None:
            with contextlib.suppress(Exception):  # a device gone meanwhile: nothing to release
                runner.teardown()

    def after_job(self) -> None:
        """Every `canary_every_jobs` jobs, re-run the canary; quarantine on failure."""
        self.jobs_since_canary += 1
        if self.jobs_since_canary < self.timing.canary_every_jobs:
            return
        self.jobs_since_canary = 0
        self.check_health()

    def check_health(self) -> bool:
        from farm_core.schema import Device

        from . import health

        key = self.device.key
        baseline = self.statements.run(  # the device's own connection: no new one per canary
            lambda c: c.execute(select(Device.health_baseline).where(Device.key == key)).scalar()
        )
        report = health.check_guarded(self.runner, baseline, memory=not self.threaded)
        self.statements.run(lambda c: health.record_on(c, key, report, baseline))
        self.quarantined = not report.ok
        if not report.ok:
            log.warning("%s quarantined: %s", self.device.key, report.reason)
        return report.ok


_CONTEXT: ConsumerContext | None = None


def install(ctx: ConsumerContext) -> None:
    """Make `ctx` the context of the jobs this process (and its forked pool) runs."""
    global _CONTEXT
    _CONTEXT = ctx


def current_context() -> ConsumerContext:
    if _CONTEXT is None:
        raise RuntimeError("no device context: run jobs through worker_agent.consumer")
    return _CONTEXT


def worker_argv(ctx: ConsumerContext, loglevel: str) -> list[str]:
    return [
        "worker",
        "--queues",
        queue_for(ctx.device.key),
        "--concurrency",
        "1",
        "--pool",
        "prefork",
        "--hostname",
        f"{ctx.device.key}@{host_name()}",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        loglevel,
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m worker_agent.consumer")
    p.add_argument("--device", required=True, help="the device as JSON (DeviceInfo)")
    p.add_argument("--db", required=True)
    p.add_argument("--broker", required=True)
    p.add_argument("--worker", default="", help="identity (default host:pid:key)")
    p.add_argument("--loglevel", default="WARNING")
    p.add_argument("--cpus", default="", help="run only on these CPUs (e.g. 0-3,8)")
    args = p.parse_args(argv)
    if args.cpus:  # first: the threads and the pool child started later inherit it
        from worker_agent.cpu_sets import parse_list, pin

        pin(parse_list(args.cpus))
    device = DeviceInfo.from_json(args.device)
    worker = args.worker or f"{host_name()}:{os.getpid()}:{device.key}"
    from billiard.util import set_pdeathsig

    with contextlib.suppress(OSError):  # Linux only
        set_pdeathsig(signal.SIGTERM)  # the agent died: finish the job, then stop
    ctx = ConsumerContext(device, args.db, args.broker, worker)
    # under `python -m` this file is __main__: install into the module the task imports
    importlib.import_module("worker_agent.consumer").install(ctx)
    from worker_agent.tasks import app

    prepare_broker(args.broker)
    configure(app, args.broker)
    if args.broker.startswith("redis"):
        from worker_agent.ack_repair import AckRepair

        app.steps["consumer"].add(AckRepair)  # a failed ack must not stop consumption
    logging.basicConfig(level=args.loglevel, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)  # "no hostname" chatter
    warnings.filterwarnings("ignore", message=".*superuser privileges.*")
    app.worker_main(["--quiet", *worker_argv(ctx, args.loglevel)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
