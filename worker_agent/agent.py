"""A lab host's agent: registers its devices, checks their health, heartbeats, and keeps
one consumer process per healthy device running.

A device whose canary fails is quarantined: its consumer is stopped (it receives no jobs)
and its canary is retried every `health_retry_s` until it passes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import Engine, insert, select, update

from orchestrator.celery_app import queue_for
from orchestrator.database import open_database
from orchestrator.schema import QUARANTINED, Device, utcnow
from orchestrator.settings import Timing

from . import health
from .devices import DeviceInfo, host_name
from .discovery import present
from .runners import make_runner

log = logging.getLogger(__name__)

#: Wait this long for a consumer to finish its job on stop before killing it.
STOP_GRACE_S = 10.0
#: A consumer that exits is started again after this long.
RESTART_DELAY_S = 2.0
REPO_ROOT = Path(__file__).resolve().parent.parent


class Agent:
    """Serves `devices` from this host: registration, health, heartbeats, consumers."""

    def __init__(
        self,
        db_url: str,
        broker_url: str,
        devices: Sequence[DeviceInfo],
        name: str = "",
        timing: Timing | None = None,
        loglevel: str = "WARNING",
        say: Callable[[str], None] | None = None,
        log_dir: Path | None = None,
    ):
        self.db_url = db_url
        self.broker_url = broker_url
        self.devices = {d.key: d for d in devices}
        self.name = name or f"{host_name()}:{os.getpid()}"
        self.timing = timing or Timing.from_env()
        self.loglevel = loglevel
        self.say = say or (lambda msg: log.info("%s", msg))
        self.log_dir = log_dir  #: consumers write their logs here (default: inherit stdout)
        self.engine: Engine = open_database(db_url)
        self.consumers: dict[str, subprocess.Popen] = {}
        self.quarantined: set[str] = set()
        self._last_check: dict[str, float] = {}
        self._exited_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- registration and health --------------------------------------------------------

    def register(self) -> None:
        """Insert or refresh each device's row with its facts; it is online from now."""
        now = utcnow()
        with self.engine.begin() as conn:
            have = set(
                conn.execute(select(Device.key).where(Device.key.in_(list(self.devices)))).scalars()
            )
            for d in self.devices.values():
                values = d.row() | {"agent": self.name, "state": "online", "last_seen": now}
                if d.key in have:
                    conn.execute(update(Device).where(Device.key == d.key).values(**values))
                else:
                    conn.execute(insert(Device).values(**values, registered_at=now))

    def check(self, key: str) -> health.HealthReport:
        """Run `key`'s canary in this process (its consumer is not running) and record it."""
        with self.engine.begin() as conn:
            baseline = conn.execute(
                select(Device.health_baseline).where(Device.key == key)
            ).scalar()
        try:
            runner = make_runner(self.devices[key])
            runner.setup()
            report = health.check(runner, baseline)
            runner.teardown()
        except Exception as exc:  # noqa: BLE001 - any failure to even start is unhealthy
            report = health.HealthReport(False, f"canary failed: {type(exc).__name__}: {exc}")
        health.record(self.engine, key, report, baseline)
        self._last_check[key] = time.monotonic()
        if report.ok:
            self.quarantined.discard(key)
        else:
            self.quarantined.add(key)
        return report

    def check_all(self) -> dict[str, health.HealthReport]:
        reports = {}
        for key in self.devices:
            reports[key] = r = self.check(key)
            state = "ok" if r.ok and not r.skipped else ("skipped" if r.ok else "QUARANTINED")
            self.say(f"canary {key}: {state}{' - ' + r.reason if r.reason else ''}")
        return reports

    def heartbeat(self) -> None:
        """Mark this agent's devices alive now; a phone no longer attached goes offline."""
        alive = present(list(self.devices.values()))
        gone = [k for k in self.devices if k not in alive]
        with self.engine.begin() as conn:
            conn.execute(
                update(Device)
                .where(Device.key.in_(sorted(alive)))
                .values(last_seen=utcnow(), state="online", agent=self.name)
            )
            if gone:
                conn.execute(update(Device).where(Device.key.in_(gone)).values(state="offline"))

    # -- consumers ----------------------------------------------------------------------

    def _start_consumer(self, key: str) -> None:
        cmd = [
            sys.executable,
            "-m",
            "worker_agent.consumer",
            "--device",
            self.devices[key].to_json(),
            "--db",
            self.db_url,
            "--broker",
            self.broker_url,
            "--loglevel",
            self.loglevel,
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = (self.log_dir / f"{queue_for(key)}.log").open("a")
        self.consumers[key] = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
        if out is not None:
            out.close()  # the child holds its own descriptor

    def _stop_consumers(self, keys: Sequence[str], grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM (Celery's warm shutdown: the current job finishes) to all at once, then
        SIGKILL whatever is still there after `grace_s` (its job's lease runs out and the
        reconciler moves it)."""
        procs = [p for k in keys if (p := self.consumers.pop(k, None)) and p.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def supervise_once(self) -> None:
        """One round: heartbeat, follow quarantine both ways, restart exited consumers."""
        self.heartbeat()
        with self.engine.begin() as conn:
            marked = set(
                conn.execute(
                    select(Device.key).where(
                        Device.key.in_(list(self.devices)), Device.health == QUARANTINED
                    )
                ).scalars()
            )
        for key in marked - self.quarantined:  # a consumer's canary failed
            self.quarantined.add(key)
            self._last_check[key] = time.monotonic()
            self.say(f"{key} quarantined; its consumer stops")
            self._stop_consumers([key])
        now = time.monotonic()
        for key in sorted(self.quarantined):
            due = now - self._last_check.get(key, 0) >= self.timing.health_retry_s
            if due and self.check(key).ok:
                self.say(f"{key} passed its canary again; back in service")
        for key in self.devices:
            if key in self.quarantined:
                continue
            proc = self.consumers.get(key)
            if proc is None:
                self._start_consumer(key)
            elif proc.poll() is not None:
                exited = self._exited_at.setdefault(key, now)
                if now - exited >= RESTART_DELAY_S:
                    self.say(f"consumer of {key} exited ({proc.returncode}); restarting")
                    del self._exited_at[key]
                    self._start_consumer(key)

    # -- life cycle ---------------------------------------------------------------------

    def start(self, canary: bool = True) -> None:
        """Register, check health (unless done already), start consumers and supervising."""
        self.register()
        if canary:
            self.check_all()
        self.supervise_once()
        self._thread = threading.Thread(target=self._loop, name="agent", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.timing.heartbeat_s):
            try:
                self.supervise_once()
            except Exception as exc:  # noqa: BLE001 - keep beating through DB blips
                log.warning("agent round failed: %s", exc)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop supervising and stop every consumer."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=grace_s)
        self._stop_consumers(list(self.consumers), grace_s)

    def wait(self) -> None:
        """Block until stopped (SIGTERM/SIGINT stop the agent)."""
        while not self._stop.wait(1.0):
            pass
