"""An agent serving many no-op devices: one consumer process per device vs device groups;
and a fleet of agents under faults (issue 44).

    python bench/bench_fleet.py [--devices 100] [--jobs-per-device 3] [--modes processes,group]
        [--group-devices N]
    python bench/bench_fleet.py --fleet [--devices 1000] [--agents 10] [--jobs-per-device 10]
        [--celery-pool threads] [--keep]

For each mode, on a fresh PostgreSQL database and a redis-server of its own, it starts
`devicefarm worker` with `--devices` no-op devices (canaries on), in the group mode with
`--group-devices` (default: all the devices in one group), and measures:

- ready: seconds from the agent's start until every device's consumer said it is ready;
- processes in the agent's session and their PSS (/proc/PID/smaps_rollup) once idle, per
  device, before the campaign and again after it;
- a campaign of `--jobs-per-device` jobs per device (one model each, `cpu`): seconds from
  submission to the first job's start, jobs/s from submission to the last end, and every
  job done exactly once (succeeded, one result for its last attempt);
- PostgreSQL connections to the farm's database: the most during the campaign (sampled
  every 0.2 s), and once idle after it.

Targets (issue 44): idle PSS per device at most 10 MiB and no process of its own, every
device ready within 15 s. Nothing but the agent runs the jobs: no reconciler.

`--fleet`: `--devices` over `--agents` agents on this machine (each a simulated host: its
own name and device keys, its devices in one group), one PostgreSQL database and one
persistent redis-server (append-only file), and the reconciler running every second in a
process of its own (labkit.timed_reconciler: the command's pass, each timed). First plain
Celery (labkit.plain_celery: one worker per agent, `--celery-pool` with as many threads as
an agent has devices) runs as many no-op tasks as the campaign has jobs on the same Redis;
then the agents start one after the other (each as on a host of its own); then a campaign
of `--jobs-per-device` models on every device. A quarter of the way in one agent is
SIGKILLed with its group process (a host that lost power) and started again 5 s later
(`--agent-down S`: past the offline timeout, 35 s, its devices go offline and the
reconciler moves their dispatched jobs off them, then home when they are back);
half-way redis-server is SIGKILLed and started again 3 s later. Printed beside the targets:
PSS per device, ready per agent, reconciler pass times (target 1 s), PostgreSQL
connections (peak, idle after) and Redis clients, jobs/s before the first fault and over
the whole campaign against plain Celery (run again after it), and the jobs lost,
duplicated or stuck (labkit.job_audit; target 0), with why attempts were retried. Exit
status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from labkit.proc_stats import group_cpu_s, group_pss_mib, pss_kib, session_pids  # noqa: E402
from labkit.processes import free_port, kill_group  # noqa: E402
from labkit.redis_server import RedisServer  # noqa: E402
from labkit.scratch_db import scratch_database  # noqa: E402

TARGET_PSS_MIB = 10.0
TARGET_READY_S = 15.0
READY_TIMEOUT_S = 600.0
CAMPAIGN_TIMEOUT_S = 900.0
#: Idle for this long before processes and memory are read.
SETTLE_S = 5.0


@dataclass
class Figures:
    mode: str
    ready_s: float = 0.0
    processes: int = 0
    pss_mib: float = 0.0
    pss_after_mib: float = 0.0  #: idle again after the campaign
    first_start_s: float = 0.0
    jobs_per_s: float = 0.0
    jobs: int = 0
    once: str = ""
    pg_peak: int = 0
    pg_idle: int = 0
    notes: list[str] = field(default_factory=list)


#: The bench's own connections say so, and are not counted.
BENCH_APP = "bench_fleet"


def pg_connections(conn, db_name: str) -> int:
    """Connections to `db_name` but the bench's own, read on `conn`: a connection the bench
    holds from the start (a farm at max_connections refuses new ones)."""
    from sqlalchemy import text

    return conn.execute(
        text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = :n AND application_name <> :me"
        ),
        {"n": db_name, "me": BENCH_APP},
    ).scalar()


def run_mode(mode: str, n_devices: int, per_device: int, workdir: Path, size: int = 0) -> Figures:
    from sqlalchemy import create_engine

    from labkit.scratch_db import LOCAL_SERVER
    from worker_agent.devices import host_name

    fig = Figures(mode)
    home = workdir / mode
    home.mkdir()
    redis = RedisServer(free_port(), home)
    redis.start()
    try:
        with scratch_database("bench_fleet") as db_url:
            db_name = db_url.rsplit("/", 1)[1]
            admin = create_engine(f"{LOCAL_SERVER}/postgres", isolation_level="AUTOCOMMIT")
            watch = admin.connect()  # held: a farm at max_connections refuses new ones
            keys = [f"noop:f{i:04d}" for i in range(n_devices)]
            cmd = [sys.executable, "-m", "devicefarm.cli", "worker", "--broker", redis.url]
            cmd += ["--db", db_url, "--devices", ",".join(f"{k}?tags=fleet" for k in keys)]
            cmd += ["--name", f"fleet-{mode}", "--loglevel", "INFO"]
            if mode == "group":
                cmd += ["--group-devices", str(size or n_devices)]
            env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(home / "farm"))
            env.pop("DEVICEFARM_GROUP_DEVICES", None)
            log = home / "agent.log"
            start = time.monotonic()
            agent = subprocess.Popen(
                cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            try:
                host = host_name()
                want = [f"{k}@{host} ready." for k in keys]
                while not all(w in (text := log.read_text()) for w in want):
                    if agent.poll() is not None or time.monotonic() - start > READY_TIMEOUT_S:
                        raise SystemExit(f"{mode}: agent not ready:\n{text[-2000:]}")
                    time.sleep(0.1)
                fig.ready_s = time.monotonic() - start
                time.sleep(SETTLE_S)
                pids = session_pids(agent.pid)
                fig.processes = len(pids)
                fig.pss_mib = sum(pss_kib(p) for p in pids) / 1024
                campaign(fig, db_url, redis.url, home, per_device, watch, db_name)
                time.sleep(SETTLE_S)
                fig.pg_idle = pg_connections(watch, db_name)
                fig.pss_after_mib = sum(pss_kib(p) for p in session_pids(agent.pid)) / 1024
            finally:
                kill_group(agent, signal.SIGTERM)
                watch.close()
                admin.dispose()
    finally:
        redis.stop()
    return fig


def campaign(fig, db_url, broker_url, home, per_device, watch, db_name) -> None:
    from sqlalchemy import func, select
    from sqlalchemy.exc import OperationalError

    from farm_core.database import make_engine
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.schema import TERMINAL_STATES, Job, Result, utcnow
    from labkit.farm_rows import write_model
    from orchestrator.submit import RunSettings, submit

    models = [write_model(home / f"m{i}.tflite", 1.0 + i) for i in range(per_device)]
    # one connection, held from before the campaign and named, so not counted
    engine = make_engine(f"{db_url}?application_name={BENCH_APP}", pool=1)
    dispatcher = CeleryDispatcher(broker_url)
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], pg_connections(watch, db_name))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        sent_at = utcnow()
        sub = submit(engine, dispatcher, models, "tag=fleet", "cpu", RunSettings(1, diff_runs=0))
        fig.jobs = sub.jobs
        deadline = time.monotonic() + CAMPAIGN_TIMEOUT_S
        while True:
            try:
                with engine.begin() as conn:
                    ended = conn.execute(
                        select(func.count()).where(
                            Job.campaign_id == sub.campaign_id, Job.state.in_(TERMINAL_STATES)
                        )
                    ).scalar()
            except OperationalError:  # the server at max_connections: ask again
                ended = 0
            if ended >= sub.jobs:
                break
            if time.monotonic() > deadline:
                fig.notes.append(f"only {ended} of {sub.jobs} ended")
                break
            time.sleep(0.1)
    finally:
        stop.set()
        sampler.join()
        dispatcher.close()
    fig.pg_peak = peak[0]
    with engine.begin() as conn:
        jobs = conn.execute(
            select(Job.id, Job.state, Job.attempt, Job.started_at, Job.finished_at).where(
                Job.campaign_id == sub.campaign_id
            )
        ).all()
        results = conn.execute(
            select(Result.job_id, Result.attempt).where(Result.campaign_id == sub.campaign_id)
        ).all()
    engine.dispose()
    starts = [j.started_at for j in jobs if j.started_at]
    ends = [j.finished_at for j in jobs if j.finished_at]
    if starts:
        fig.first_start_s = (min(starts) - sent_at).total_seconds()
    if ends:
        fig.jobs_per_s = len(jobs) / max((max(ends) - sent_at).total_seconds(), 1e-6)
    per_job = Counter(r.job_id for r in results)
    last = {j.id: j.attempt for j in jobs}
    states = Counter(j.state for j in jobs)
    once = (
        states == Counter({"succeeded": len(jobs)})
        and sorted(per_job) == sorted(last)
        and set(per_job.values()) == {1}
        and all(last[r.job_id] == r.attempt for r in results)
    )
    dupes = sum(c - 1 for c in per_job.values())
    fig.once = "yes" if once else f"NO ({dict(states)}, {len(results)} results, {dupes} dup)"


def table(figs: list[Figures], n_devices: int, size: int) -> str:
    rows = [
        ("processes in the agent's session", lambda f: f"{f.processes}"),
        ("PSS idle, MiB (all)", lambda f: f"{f.pss_mib:.0f}"),
        ("PSS idle per device, MiB", lambda f: f"{f.pss_mib / n_devices:.1f}"),
        ("  the same after the campaign", lambda f: f"{f.pss_after_mib / n_devices:.1f}"),
        ("every device ready, s", lambda f: f"{f.ready_s:.1f}"),
        ("campaign jobs", lambda f: f"{f.jobs}"),
        ("first job started after submit, s", lambda f: f"{f.first_start_s:.2f}"),
        ("jobs/s (submit to last end)", lambda f: f"{f.jobs_per_s:.1f}"),
        ("every job exactly once", lambda f: f.once),
        ("PostgreSQL connections, peak", lambda f: f"{f.pg_peak}"),
        ("PostgreSQL connections, idle after", lambda f: f"{f.pg_idle}"),
    ]
    group = f"groups of {size}" if size and size < n_devices else "one group"
    names = {"processes": "a process per device", "group": group}
    head = [f"{n_devices} no-op devices", *(names.get(f.mode, f.mode) for f in figs)]
    lines = [head] + [[label, *(fn(f) for f in figs)] for label, fn in rows]
    width = [max(len(r[i]) for r in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(r))
           for r in lines]  # fmt: skip
    for f in figs:
        out += [f"{f.mode}: {note}" for note in f.notes]
    return "\n".join(out)


# -- the fleet mode: many agents, a reconciler, faults -------------------------------------

#: Fleet-mode targets (issue 44) beside those above.
TARGET_PASS_S = 1.0
#: The fleet's faults, by the share of the campaign's jobs ended: an agent SIGKILLed (its
#: whole process group, as a host that lost power) and started again AGENT_DOWN_S later;
#: then redis-server SIGKILLed and started again (persistent) REDIS_DOWN_S later.
KILL_AT, REDIS_AT = 0.25, 0.5
AGENT_DOWN_S, REDIS_DOWN_S = 5.0, 3.0
#: Every job must have ended this long after the last fault was repaired.
RECOVERY_S = 300.0


@dataclass
class FleetFigures:
    agents: int
    per_agent: int
    ready_s: list[float] = field(default_factory=list)  #: per agent, started one by one
    restart_ready_s: float = 0.0  #: the killed agent's, started again
    agent_down_s: float = AGENT_DOWN_S  #: how long the killed agent stays down
    processes: int = 0
    pss_mib: float = 0.0
    pss_after_mib: float = 0.0
    idle_cpu: float = 0.0  #: cores the idle agents keep busy
    celery: list[float] = field(default_factory=list)  #: tasks/s, before and after
    jobs: int = 0
    first_start_s: float = 0.0
    jobs_per_s: float = 0.0  #: submission to the last end, faults included
    jobs_per_s_clean: float = 0.0  #: submission to the first fault
    recovery_s: float = 0.0  #: the last fault repaired to the last job's end
    pg_peak: int = 0
    pg_idle: int = 0
    redis_peak: int = 0
    passes: list[dict] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    audit: object = None
    lost_calls: object = None  #: labkit.lost_calls.LostCalls
    sent_at: object = None  #: the campaign's submission (UTC, as the database's times)

    @property
    def devices(self) -> int:
        return self.agents * self.per_agent


#: An agent that exits is started again after this long, as its systemd unit says
#: (deploy/systemd/devicefarm-agent.service: Restart=always, RestartSec=10), at most
#: this many starts in all.
RESTART_SEC = 10.0
SUPERVISOR_STARTS = 4


class Agent:
    """`devicefarm worker` for one simulated host: its own name and device keys, its
    devices in one group; started again when it exits, as its supervisor would."""

    def __init__(self, number: int, per_agent: int, db_url: str, broker_url: str, home: Path):
        self.name = f"host{number:02d}"
        self.keys = [f"noop:h{number:02d}d{i:03d}" for i in range(per_agent)]
        self.home = home / self.name
        self.home.mkdir()
        self.cmd = [sys.executable, "-m", "devicefarm.cli", "worker", "--broker", broker_url]
        self.cmd += ["--db", db_url, "--devices", ",".join(f"{k}?tags=fleet" for k in self.keys)]
        self.cmd += ["--name", self.name, "--group-devices", str(per_agent), "--loglevel", "INFO"]
        self.proc: subprocess.Popen | None = None
        self.log = self.home / "agent.log"
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.log = self.home / f"agent{self.starts}.log"
        env = dict(os.environ, PYTHONPATH=str(REPO), DEVICEFARM_HOME=str(self.home / "farm"))
        env.pop("DEVICEFARM_GROUP_DEVICES", None)
        self.proc = subprocess.Popen(
            self.cmd, env=env, stdout=self.log.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def ready(self) -> bool:
        """Whether every device said it is ready (since the last start)."""
        from worker_agent.devices import host_name

        host, text = host_name(), self.log.read_text()
        if self.proc.poll() is not None:
            if self.starts >= SUPERVISOR_STARTS:
                raise SystemExit(f"{self.name} exited:\n{text[-2000:]}")
            why = text.strip().splitlines()[-1] if text.strip() else f"exit {self.proc.returncode}"
            say(f"{self.name} exited ({why[:160]}); started again in {RESTART_SEC:g} s")
            time.sleep(RESTART_SEC)  # as systemd would: deploy/systemd/devicefarm-agent.service
            self.start()
            return False
        return all(f"{k}@{host} ready." in text for k in self.keys)

    def wait_ready(self) -> float:
        """Seconds from now until every device said it is ready."""
        start = time.monotonic()
        while not self.ready():
            if time.monotonic() - start > READY_TIMEOUT_S:
                raise SystemExit(f"{self.name}: not ready in {READY_TIMEOUT_S:g} s")
            time.sleep(0.1)
        return time.monotonic() - start

    def kill(self) -> None:
        kill_group(self.proc, signal.SIGKILL)


def run_fleet(
    agents: int,
    per_agent: int,
    per_device: int,
    workdir: Path,
    celery_pool: str,
    agent_down_s: float = AGENT_DOWN_S,
) -> FleetFigures:
    from sqlalchemy import create_engine

    from labkit.plain_celery import PlainCelery
    from labkit.scratch_db import LOCAL_SERVER

    fig = FleetFigures(agents, per_agent, agent_down_s=agent_down_s)
    redis = RedisServer(free_port(), workdir, persistent=True)
    redis.start()
    fleet: list[Agent] = []
    reconciler = None
    try:
        with scratch_database("bench_fleet") as db_url:
            db_name = db_url.rsplit("/", 1)[1]
            admin = create_engine(f"{LOCAL_SERVER}/postgres", isolation_level="AUTOCOMMIT")
            watch = admin.connect()  # held: a farm at max_connections refuses new ones
            concurrency = per_agent if celery_pool == "threads" else 1
            say(f"plain Celery: {agents} workers ({celery_pool}, {concurrency} each)")
            plain = PlainCelery(redis.url, agents, workdir / "celery.log", celery_pool, concurrency)
            try:
                jobs = agents * per_agent * per_device
                fig.celery.append(plain.run(jobs))
                say(f"plain Celery: {fig.celery[-1]:.0f} tasks/s")
                passes = workdir / "passes.jsonl"
                reconciler = subprocess.Popen(
                    [sys.executable, "-m", "labkit.timed_reconciler", "--db", db_url]
                    + ["--broker", redis.url, "--every", "1", "--out", str(passes)],
                    env=dict(os.environ, PYTHONPATH=str(REPO)),
                    stdout=(workdir / "reconciler.log").open("w"),
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                for number in range(agents):
                    agent = Agent(number, per_agent, db_url, redis.url, workdir)
                    agent.start()
                    fig.ready_s.append(agent.wait_ready())
                    fleet.append(agent)
                    say(f"{agent.name}: {per_agent} devices ready in {fig.ready_s[-1]:.1f} s")
                time.sleep(SETTLE_S)
                pgids = [a.proc.pid for a in fleet]
                fig.processes, fig.pss_mib = group_pss_mib(pgids)
                cpu0 = group_cpu_s(pgids)
                time.sleep(SETTLE_S)
                fig.idle_cpu = (group_cpu_s(pgids) - cpu0) / SETTLE_S
                t_campaign = time.time()
                fleet_campaign(fig, db_url, redis, fleet, per_device, workdir, watch, db_name)
                time.sleep(SETTLE_S)
                fig.pg_idle = pg_connections(watch, db_name)
                fig.pss_after_mib = group_pss_mib([a.proc.pid for a in fleet])[1]
                fig.celery.append(plain.run(jobs))
                say(f"plain Celery again: {fig.celery[-1]:.0f} tasks/s")
                lines = passes.read_text().splitlines()
                fig.passes = [p for p in map(json.loads, lines) if p["at"] >= t_campaign]
            finally:
                plain.close()
                for agent in fleet:
                    kill_group(agent.proc, signal.SIGTERM)
                if reconciler is not None:
                    kill_group(reconciler, signal.SIGTERM)
                watch.close()
                admin.dispose()
    finally:
        redis.stop()
    return fig


def say(line: str) -> None:
    print(line, flush=True)


def fleet_campaign(fig, db_url, redis, fleet, per_device, workdir, watch, db_name) -> None:
    """Submit the campaign, inject the faults as it runs, wait for its end, audit it."""
    import redis as redis_lib
    from sqlalchemy import func, select
    from sqlalchemy.exc import OperationalError

    from farm_core.database import make_engine
    from farm_core.dispatch import CeleryDispatcher
    from farm_core.schema import TERMINAL_STATES, Job, utcnow
    from labkit import lost_calls
    from labkit.farm_rows import write_model
    from labkit.job_audit import audit
    from orchestrator.submit import RunSettings, submit

    models = [write_model(workdir / f"m{i}.tflite", 1.0 + i) for i in range(per_device)]
    engine = make_engine(f"{db_url}?application_name={BENCH_APP}", pool=1)
    dispatcher = CeleryDispatcher(redis.url)
    client = redis_lib.Redis.from_url(redis.url)
    victim = fleet[len(fleet) // 2]
    t0 = time.monotonic()
    sent_at = fig.sent_at = utcnow()
    sub = submit(engine, dispatcher, models, "tag=fleet", "cpu", RunSettings(1, diff_runs=0))
    dispatcher.close()
    fig.jobs = sub.jobs
    say(f"campaign: {sub.jobs} jobs submitted in {time.monotonic() - t0:.1f} s")

    def fault(what: str) -> None:
        fig.faults.append(f"{time.monotonic() - t0:6.1f} s: {what}")
        say(f"fault at {fig.faults[-1]}")

    killed_at = restarted = redis_done = None
    repaired = t0
    deadline = None
    ended = 0
    while ended < sub.jobs:
        now = time.monotonic()
        try:
            with engine.begin() as conn:
                ended = conn.execute(
                    select(func.count()).where(
                        Job.campaign_id == sub.campaign_id, Job.state.in_(TERMINAL_STATES)
                    )
                ).scalar()
            fig.pg_peak = max(fig.pg_peak, pg_connections(watch, db_name))
        except OperationalError:  # the server at max_connections: ask again
            pass
        with contextlib.suppress(redis_lib.RedisError):
            clients = client.info("clients")["connected_clients"] - 1  # less the bench's
            fig.redis_peak = max(fig.redis_peak, clients)
        if killed_at is None and ended >= KILL_AT * sub.jobs:
            fig.jobs_per_s_clean = ended / (now - t0)
            victim.kill()
            killed_at = now
            fault(f"{victim.name} SIGKILLed (agent and group process), {ended} jobs ended")
        elif killed_at is not None and restarted is None and now - killed_at >= fig.agent_down_s:
            victim.start()
            restarted = now
            fault(f"{victim.name} started again")
        elif restarted is not None and not fig.restart_ready_s and victim.ready():
            fig.restart_ready_s = now - restarted
            say(f"{victim.name}: ready again in {fig.restart_ready_s:.1f} s")
        elif restarted is not None and redis_done is None and ended >= REDIS_AT * sub.jobs:
            redis.stop()
            fault(f"redis-server SIGKILLed, {ended} jobs ended")
            time.sleep(REDIS_DOWN_S)
            redis.start()
            redis_done = repaired = time.monotonic()
            fault("redis-server started again (append-only file)")
        if redis_done is not None and deadline is None:
            deadline = repaired + RECOVERY_S
        if deadline is not None and now > deadline:
            say(f"campaign: {sub.jobs - ended} jobs not ended {RECOVERY_S:g} s after the faults")
            break
        if now - t0 > CAMPAIGN_TIMEOUT_S:
            say(f"campaign: {sub.jobs - ended} jobs not ended after {CAMPAIGN_TIMEOUT_S:g} s")
            break
        time.sleep(0.5)
    with engine.begin() as conn:
        starts, ends = conn.execute(
            select(func.min(Job.started_at), func.max(Job.finished_at)).where(
                Job.campaign_id == sub.campaign_id
            )
        ).one()
    if starts:
        fig.first_start_s = (starts - sent_at).total_seconds()
    if ends:
        fig.jobs_per_s = sub.jobs / max((ends - sent_at).total_seconds(), 1e-6)
        fig.recovery_s = (ends - sent_at).total_seconds() - (repaired - t0)
    fig.audit = audit(engine, sub.campaign_id)
    stale = lost_calls.stale_deliveries(workdir.glob("host*/agent*.log"))
    left = lost_calls.in_broker(redis.url)
    fig.lost_calls = lost_calls.judge(engine, sub.campaign_id, stale, left)
    engine.dispose()


def fleet_report(fig: FleetFigures) -> str:
    import statistics

    a, calls = fig.audit, fig.lost_calls
    ok_passes = [p for p in fig.passes if "error" not in p]
    secs = sorted(p["s"] for p in ok_passes)
    over = sum(1 for s in secs if s > TARGET_PASS_S)
    reasons = ("lease_expired", "moved_off_lost_device", "resent_lost_message", "stalled")
    moved = {r: sum(p.get(r, 0) for p in ok_passes) for r in reasons}
    found_after = sum(p.get("lost_found", 0) for p in ok_passes)
    per_pss = fig.pss_mib / fig.devices
    worst_ready = max(fig.ready_s)
    ratio = fig.jobs_per_s_clean / fig.celery[0] if fig.celery else 0.0

    def mark(ok: bool) -> str:
        return "ok" if ok else "MISSES"

    rows = [
        ("agents x devices", f"{fig.agents} x {fig.per_agent} = {fig.devices}", ""),
        ("processes (all agents)", f"{fig.processes}", ""),
        ("CPU of the idle agents, cores", f"{fig.idle_cpu:.2f}", ""),
        ("PSS idle per device, MiB", f"{per_pss:.2f} (after: "
         f"{fig.pss_after_mib / fig.devices:.2f})", f"<= {TARGET_PSS_MIB:g}: "
         f"{mark(per_pss <= TARGET_PSS_MIB)}"),
        ("ready per agent, s (worst, median)", f"{worst_ready:.1f}, "
         f"{statistics.median(fig.ready_s):.1f}; killed one again: {fig.restart_ready_s:.1f}",
         f"< {TARGET_READY_S:g}: {mark(worst_ready < TARGET_READY_S)}"),
        ("campaign jobs", f"{fig.jobs}", ""),
        ("first job started after submit, s", f"{fig.first_start_s:.2f}", ""),
        ("jobs/s before the first fault", f"{fig.jobs_per_s_clean:.1f}", ""),
        ("jobs/s submit to last end (faults in)", f"{fig.jobs_per_s:.1f}", ""),
        ("plain Celery tasks/s (before, after)", ", ".join(f"{c:.0f}" for c in fig.celery), ""),
        ("farm / plain Celery (before the fault)", f"{ratio:.2f}", ""),
        ("last job ended after the last repair, s", f"{fig.recovery_s:.1f}", ""),
        ("reconciler passes in the campaign", f"{len(secs)} ({len(fig.passes) - len(secs)} "
         "failed: broker or database away)", ""),
        ("reconciler pass, s (median, p95, max)", (f"{statistics.median(secs):.3f}, "
         f"{secs[int(0.95 * (len(secs) - 1))]:.3f}, {secs[-1]:.3f}; {over} over "
         f"{TARGET_PASS_S:g} s") if secs else "none", f"<= {TARGET_PASS_S:g}: "
         f"{mark(bool(secs) and secs[-1] <= TARGET_PASS_S)}"),
        ("reconciler moved: lease expired, off a lost device, lost message, stalled",
         ", ".join(str(moved[r]) for r in reasons), ""),
        ("PostgreSQL connections: peak, idle after", f"{fig.pg_peak}, {fig.pg_idle}", ""),
        ("Redis clients at the peak", f"{fig.redis_peak}", ""),
        ("jobs: lost, duplicated, stuck, stray", f"{len(a.lost)}, {len(a.duplicated)}, "
         f"{len(a.stuck)}, {len(a.stray)}", f"0: {mark(a.clean)}"),
        ("jobs retried; states", f"{a.retried}; {dict(a.states)}", ""),
        ("called lost, yet in Redis right after the pass", f"{found_after}", ""),
        ("attempts called lost: message refused as stale later, still in Redis",
         f"{calls.called}: {len(calls.arrived_later)}, {len(calls.still_in_broker)}",
         f"none wrongly: {mark(calls.wrong == 0)}"),
        *(
            (f"  attempts ended {outcome}", f"{n}, {(first - fig.sent_at).total_seconds():.1f}"
             f"-{(last - fig.sent_at).total_seconds():.1f} s after submission", "")
            for outcome, (n, first, last) in sorted(a.attempts.items())
        ),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [
        f"{label.ljust(width)}  {value}" + (f"   [{t}]" if t else "") for label, value, t in rows
    ]
    lines += ["faults:", *(f"  {f}" for f in fig.faults)]
    slow = [p for p in ok_passes if p["s"] > TARGET_PASS_S]
    submitted = fig.sent_at.replace(tzinfo=UTC).timestamp()  # naive UTC, as in the database
    if slow:
        lines.append(f"passes over {TARGET_PASS_S:g} s (since submission; phases, s):")
    for p in slow[:12]:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in p.get("phases", {}).items() if v >= 0.05)
        lines.append(
            f"  {p['at'] - submitted:6.1f}: {p['s']:.2f} s, sent {p.get('sent', 0)},"
            f" lost {p.get('resent_lost_message', 0)} (in Redis after: {p.get('lost_found', 0)}),"
            f" {p.get('probed', 0)} queues probed;"
            f" {phases}"
        )
    wrongly = sorted(set(calls.arrived_later) | set(calls.still_in_broker))
    if wrongly:
        lines.append(f"called lost wrongly (job, attempt): {wrongly[:20]}")
    for name, ids in (("lost", a.lost), ("duplicated", a.duplicated), ("stuck", a.stuck)):
        if ids:
            lines.append(f"{name} job ids: {ids[:20]}{' ...' if len(ids) > 20 else ''}")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=100)
    p.add_argument("--jobs-per-device", type=int, default=3)
    p.add_argument("--modes", default="processes,group", help="processes, group or both")
    p.add_argument("--group-devices", type=int, default=0, help="per group (default: all)")
    p.add_argument("--fleet", action="store_true", help="the fleet mode (module docstring)")
    p.add_argument("--agents", type=int, default=10, help="fleet: agent processes")
    p.add_argument("--celery-pool", default="threads", help="fleet: plain Celery's pool")
    p.add_argument("--keep", action="store_true", help="fleet: keep the logs (prints where)")
    p.add_argument(
        "--agent-down",
        type=float,
        default=AGENT_DOWN_S,
        help="fleet: seconds the killed agent stays down (past 35 its devices go offline)",
    )
    args = p.parse_args()
    if args.fleet:
        return fleet_main(args)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    figs = []
    with tempfile.TemporaryDirectory(prefix="bench_fleet_") as tmp:
        for mode in modes:
            print(f"{mode}: starting an agent with {args.devices} no-op devices", flush=True)
            figs.append(
                run_mode(mode, args.devices, args.jobs_per_device, Path(tmp), args.group_devices)
            )
    print(table(figs, args.devices, args.group_devices))
    for f in figs:
        per = f.pss_mib / args.devices
        ok = per <= TARGET_PSS_MIB and f.ready_s < TARGET_READY_S and f.processes < args.devices
        print(
            f"{f.mode}: PSS/device {per:.1f} MiB (target <= {TARGET_PSS_MIB:g}), ready "
            f"{f.ready_s:.1f} s (target < {TARGET_READY_S:g}): {'ok' if ok else 'MISSES'}"
        )
    return 0


def fleet_main(args: argparse.Namespace) -> int:
    """The fleet mode: --devices in all, over --agents agents; 1 when a target is missed."""
    per_agent = args.devices // args.agents
    say(f"load before: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} CPUs")
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="bench_fleet_")
            say(f"keeping {tmp} (agents' logs, reconciler passes)")
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_fleet_"))
        fig = run_fleet(
            args.agents,
            per_agent,
            args.jobs_per_device,
            Path(tmp),
            args.celery_pool,
            args.agent_down,
        )
    say(fleet_report(fig))
    say(f"load after: {os.getloadavg()[0]:.1f} (1 min)")
    secs = [p["s"] for p in fig.passes if "error" not in p]
    met = (
        fig.pss_mib / fig.devices <= TARGET_PSS_MIB
        and max(fig.ready_s) < TARGET_READY_S
        and bool(secs)
        and max(secs) <= TARGET_PASS_S
        and fig.audit.clean
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
