"""Chaos: a real farm runs a campaign of a few hundred jobs while its parts fail.

Own redis-server on a free port, a fresh PostgreSQL database, two agents (real Celery
workers, two no-op devices each), a third agent serving two simulated phones of one model
through a private real adb server, and the reconciler as `devicefarm reconcile --every 1`.
Two campaigns run at once (no-op devices; phones). Meanwhile: an agent is SIGKILLed and
started again, a phone is unplugged during its jobs, Redis is killed and started empty (no
persistence), the database refuses every connection for seconds (open ones are ended), the
phone is plugged back, Redis restarts with persistence, and a second agent serves a device
that is live. Every job must end exactly once, with one result, within RECOVERY_S of the
last fault; the figures (jobs, results, duplicates, stuck, recovery seconds) are printed.
Loopback only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.support.farm import RedisServer, free_port, wait_until

pytestmark = pytest.mark.integration

MODELS = 25
CONFIGS = "cpu,gpu-fp32,gpu-fp16"
DEVICES_A = ["noop:a1?delay_s=0.3&tags=chaos", "noop:a2?delay_s=0.3&tags=chaos"]
DEVICES_B = ["noop:b1?delay_s=0.3&tags=chaos", "noop:b2?delay_s=0.3&tags=chaos"]
#: Every job must have ended this long after the last fault was repaired.
RECOVERY_S = 120.0
#: Seconds Redis stays down, and the database refuses connections, per fault.
REDIS_DOWN_S = 3.0
DB_DOWN_S = 5.0
#: The reconciler notices a stalled consumer after this long (a backstop here).
STALL_AFTER_S = "15"
#: The phone campaign: models x configs on two phones of one model (a lost phone's jobs
#: move to its twin, never to other hardware).
PHONE_MODELS = 4
PHONE_PROFILES = ("pixel-7", "pixel-7")


@pytest.fixture
def chaos_redis(tmp_path):
    server = RedisServer(free_port(), tmp_path / "redis")
    server.workdir.mkdir()
    server.start()
    yield server
    server.stop()


def campaign_figures(farm, campaign_id: int) -> dict:
    """Jobs, results, duplicates, stuck and stray results of one campaign."""
    from sqlalchemy import select

    from farm_core.schema import TERMINAL_STATES, Job, Result

    with farm.engine.begin() as conn:
        jobs = conn.execute(
            select(Job.id, Job.state, Job.attempt).where(Job.campaign_id == campaign_id)
        ).all()
        results = conn.execute(
            select(Result.job_id, Result.attempt).where(Result.campaign_id == campaign_id)
        ).all()
    per_job = Counter(r.job_id for r in results)
    current = {(j.id, j.attempt) for j in jobs}
    return {
        "jobs": len(jobs),
        "results": len(results),
        "duplicates": sorted(k for k, n in per_job.items() if n > 1),
        "stuck": sorted(j.id for j in jobs if j.state not in TERMINAL_STATES),
        "stray": sorted(r.job_id for r in results if (r.job_id, r.attempt) not in current),
        "states": Counter(j.state for j in jobs),
        "retried": sum(1 for j in jobs if j.attempt > 1),
    }


def _phone_consumers_ready(log, keys: list[str]) -> bool:
    from worker_agent.devices import host_name

    text = log.read_text()
    return all(f"{key}@{host_name()} ready." in text for key in keys)


def test_campaign_through_chaos(
    pg_url, chaos_redis, fast_timing, monkeypatch, start_agent, models, tmp_path
) -> None:
    import importlib.util
    import shutil

    from tests.conftest import require
    from tests.integration.conftest import REPO, Farm
    from tests.integration.test_spine_stalls import DatabaseOutage, PhoneLab

    require(shutil.which("adb") is not None, "adb (Debian package adb)")
    require(importlib.util.find_spec("adbutils") is not None, "adbutils")
    monkeypatch.setenv("DEVICEFARM_STALL_AFTER_S", STALL_AFTER_S)
    farm = Farm(pg_url, chaos_redis.url)
    outage = DatabaseOutage(pg_url)
    lab = PhoneLab(tmp_path / "phones", pg_url, chaos_redis.url)
    log = tmp_path / "reconcile.log"
    reconciler = subprocess.Popen(
        [sys.executable, "-m", "devicefarm.cli", "reconcile", "--every", "1"]
        + ["--db", pg_url, "--broker", chaos_redis.url],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        phones = [lab.plug(profile=p) for p in PHONE_PROFILES]
        phone_keys = [f"android:{ph.serial}" for ph in phones]
        phone_log = lab.agent("P", devices="android", tags="phones")
        wait_until(lambda: _phone_consumers_ready(phone_log, phone_keys), 60, "phone consumers")
        start_agent("A", DEVICES_A, pg_url, chaos_redis.url)
        b = start_agent("B", DEVICES_B, pg_url, chaos_redis.url)
        subs = {
            "no-op": farm.submit(models(MODELS), "tag=chaos", CONFIGS),
            "phones": farm.submit(models(PHONE_MODELS), "tag=phones", CONFIGS),
        }
        started = time.monotonic()
        faults: list[str] = []

        def fault(what: str) -> None:
            faults.append(f"{time.monotonic() - started:5.1f} s {what}")

        time.sleep(3)
        b.kill()
        fault("agent B SIGKILLed")
        phones[1].stop()
        fault(f"phone {phone_keys[1]} unplugged")
        start_agent("B2", DEVICES_B, pg_url, chaos_redis.url)
        fault("agent B2 serves B's devices")
        chaos_redis.stop()
        time.sleep(REDIS_DOWN_S)
        chaos_redis.start()
        fault("Redis restarted empty")
        outage.begin()
        time.sleep(DB_DOWN_S)
        outage.end()
        farm.engine.dispose()
        fault("database back after refusing connections")
        lab.plug(phones[1])
        fault(f"phone {phone_keys[1]} plugged back")
        chaos_redis.persistent = True
        chaos_redis.restart()
        time.sleep(2)
        chaos_redis.stop()
        time.sleep(REDIS_DOWN_S)
        chaos_redis.start()
        fault("Redis restarted with persistence")
        dup = start_agent("dup", DEVICES_A[:1], pg_url, chaos_redis.url, wait=False)
        fault("second agent on live device noop:a1")
        repaired = time.monotonic()

        def ended():
            figures = {k: campaign_figures(farm, sub.campaign_id) for k, sub in subs.items()}
            return figures if not any(f["stuck"] for f in figures.values()) else None

        with contextlib.suppress(AssertionError):  # the figures below say what is stuck
            wait_until(ended, RECOVERY_S, "every job to end", 1.0)
        recovery_s = time.monotonic() - repaired
        figures = {k: campaign_figures(farm, sub.campaign_id) for k, sub in subs.items()}
        print(
            "\nchaos: "
            + "; ".join(
                f"{k}: jobs {f['jobs']}, results {f['results']}, duplicates "
                f"{len(f['duplicates'])}, stuck {len(f['stuck'])}, retried {f['retried']}, "
                f"states {dict(f['states'])}"
                for k, f in figures.items()
            )
            + f"; recovery {recovery_s:.1f} s (bound {RECOVERY_S:g} s), "
            f"campaign {time.monotonic() - started:.1f} s\n  " + "\n  ".join(faults)
        )
        for k, f in figures.items():
            total = subs[k].jobs
            assert f["jobs"] == total, k
            assert f["stuck"] == [], (k, f["stuck"])
            assert f["duplicates"] == [] and f["stray"] == [], (k, f)
            assert f["states"] == Counter({"succeeded": total}), (k, f["states"])
            assert f["results"] == total, k  # one result per job, for its last attempt
        assert recovery_s < RECOVERY_S
        assert reconciler.poll() is None, log.read_text()[-2000:]
        assert dup.proc.wait(30) != 0 and "noop:a1 is served by agent A" in dup.log.read_text()
    finally:
        reconciler.kill()
        reconciler.wait()
        lab.close()
        outage.close()
        farm.close()
