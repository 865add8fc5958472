"""An agent serving many no-op devices: one consumer process per device vs device groups.

    python bench/bench_fleet.py [--devices 100] [--jobs-per-device 3] [--modes processes,group]
        [--group-devices N]

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
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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


def session_pids(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def pss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:"))


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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=100)
    p.add_argument("--jobs-per-device", type=int, default=3)
    p.add_argument("--modes", default="processes,group", help="processes, group or both")
    p.add_argument("--group-devices", type=int, default=0, help="per group (default: all)")
    args = p.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
