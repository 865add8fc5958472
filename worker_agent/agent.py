"""A lab host's agent: registers its devices, checks their health, heartbeats, and keeps
one consumer process per healthy device running, or, with `group_devices` (opt-in), one
process for many no-op devices and phones (worker_agent.groups).

Heartbeats come from a thread of their own (`start_heartbeats`, before the first canary):
canaries, consumer restarts and a loaded host never delay them past `offline_after_s`.

A device whose canary fails is quarantined: its consumer is stopped, or its group pauses it
(it receives no jobs), and its canary is retried every `health_retry_s` until it passes.

Consumers share the host's CPUs within a helper budget for GPU input copies, or, with
`pin_cpus`, each runs on a set of its own (cpu_sets.py).
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
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, insert, or_, select, update

from delegate_runtime.errors import JobError
from delegate_runtime.gpu.opencl.host_copy import BUDGET_ENV
from farm_core.celery_app import queue_for
from farm_core.database import open_database
from farm_core.schema import QUARANTINED, Device, utcnow
from farm_core.settings import Timing

from . import cpu_sets, health
from .build_pools import BuildPools
from .devices import DeviceInfo, host_name
from .discovery import present
from .groups import DeviceGroups, checked_size, group_devices_default
from .runners import make_runner
from .ticking import ticking

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
        rediscover: Callable[[], Sequence[DeviceInfo]] | None = None,
        pin_cpus: bool | None = None,
        group_devices: int | None = None,
    ):
        self.db_url = db_url
        self.broker_url = broker_url
        self.devices = {d.key: d for d in devices}
        #: each consumer on CPUs of its own (default: cpu_sets.PIN_ENV)
        self.pin_cpus = cpu_sets.pin_default() if pin_cpus is None else pin_cpus
        self.cpu_layout()  # a host too small to pin is refused now, before anything starts
        self.name = name or f"{host_name()}:{os.getpid()}"
        self.timing = timing or Timing.from_env()
        self.loglevel = loglevel
        self.say = say or (lambda msg: log.info("%s", msg))
        self.log_dir = log_dir  #: consumers write their logs here (default: inherit stdout)
        #: finds devices attached since the start (phones), called every `rediscover_s`
        self.rediscover = rediscover
        self._rediscovered_at = time.monotonic()
        self._refused: set[str] = set()
        self.engine: Engine = open_database(db_url)
        self.consumers: dict[str, subprocess.Popen] = {}
        self.quarantined: set[str] = set()
        self._last_check: dict[str, float] = {}
        self._exited_at: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beats: threading.Thread | None = None
        #: no-op devices and phones, `group_devices` to a process (0: a consumer each)
        size = group_devices_default() if group_devices is None else checked_size(group_devices)
        self.groups = DeviceGroups(size, self._start_group)
        #: resident program builders for GPUs that compile one program per process
        self.build_pools = BuildPools(self.say)

    # -- registration and health --------------------------------------------------------

    def register(self) -> None:
        """Insert or refresh each device's row with its facts; it is online from now.

        A device another agent serves (online, its heartbeat within `offline_after_s`) is
        not taken over: registration waits up to `offline_after_s` for that agent to go
        quiet (a crashed agent restarted), then refuses the device with a message and
        serves the others; JobError when none is left.
        """
        deadline = time.monotonic() + self.timing.offline_after_s
        taken = self._claim_rows()
        while taken and time.monotonic() < deadline:
            time.sleep(min(self.timing.heartbeat_s, 1.0))
            taken = self._claim_rows()
        for key, (agent, seen) in sorted(taken.items()):
            self.say(
                f"{key} is served by agent {agent} (last heartbeat {seen:%Y-%m-%d %H:%M:%S} "
                "UTC): refused; stop that agent first"
            )
            del self.devices[key]
            self._refused.add(key)
        if not self.devices:
            raise JobError("every device is served by another live agent: nothing to serve")

    def _claim_rows(self, keys: Sequence[str] | None = None) -> dict[str, tuple[str, datetime]]:
        """Take each device's row (of `keys`, default all) unless another live agent holds
        it; returns those held."""
        devices = [self.devices[k] for k in (self.devices if keys is None else keys)]
        now = utcnow()
        cutoff = now - timedelta(seconds=self.timing.offline_after_s)
        free = or_(
            Device.agent == self.name,
            Device.agent == "",
            Device.state != "online",
            Device.last_seen < cutoff,
        )
        taken: dict[str, tuple[str, datetime]] = {}
        with self.engine.begin() as conn:
            have = {
                r.key: r
                for r in conn.execute(
                    select(Device.key, Device.agent, Device.last_seen).where(
                        Device.key.in_([d.key for d in devices])
                    )
                )
            }
            for d in devices:
                values = d.row() | {"agent": self.name, "state": "online", "last_seen": now}
                if d.key not in have:
                    conn.execute(insert(Device).values(**values, registered_at=now))
                    continue
                done = conn.execute(
                    update(Device).where(Device.key == d.key, free).values(**values)
                )
                if done.rowcount == 0:
                    taken[d.key] = (have[d.key].agent, have[d.key].last_seen)
        return taken

    def start_heartbeats(self) -> None:
        """Heartbeat every `heartbeat_s` from a thread of its own until `stop` (idempotent)."""
        if self._beats is None or not self._beats.is_alive():
            self._beats = threading.Thread(target=self._beat_loop, name="heartbeat", daemon=True)
            self._beats.start()

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.timing.heartbeat_s):
            try:
                self.heartbeat()
            except Exception as exc:  # noqa: BLE001 - keep beating through DB blips
                log.warning("heartbeat failed: %s", exc)

    def check(self, key: str) -> health.HealthReport:
        """Run `key`'s canary in this process (its consumer is not running) and record it."""
        with self.engine.begin() as conn:
            baseline = conn.execute(
                select(Device.health_baseline).where(Device.key == key)
            ).scalar()
        try:
            runner = make_runner(self.devices[key])
            runner.setup()
            report = health.check_guarded(runner, baseline)
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
        self.build_pools.ensure(self.devices.values())  # before the first canary builds
        reports = {}
        for key, device in self.devices.items():
            building = " (building its GPU kernels; cached after the first time)"
            what = f"canary {key}: running" + (building if device.kind == "opencl" else "")
            with ticking(self.say, what):
                reports[key] = r = self.check(key)
            state = "ok" if r.ok and not r.skipped else ("skipped" if r.ok else "QUARANTINED")
            # the first line: a driver's build log follows it (`devicefarm devices` shows it)
            why = r.reason.splitlines()[0] if r.reason else ""
            self.say(f"canary {key}: {state}{' - ' + why if why else ''}")
        return reports

    def heartbeat(self) -> None:
        """Mark this agent's devices alive now; a phone no longer attached goes offline."""
        alive = present(list(self.devices.values()))
        gone = [k for k in self.devices if k not in alive]
        with self.engine.begin() as conn:
            mine = Device.agent == self.name  # a device another agent took is left alone
            conn.execute(
                update(Device)
                .where(Device.key.in_(sorted(alive)), mine)
                .values(last_seen=utcnow(), state="online")
            )
            if gone:
                conn.execute(
                    update(Device).where(Device.key.in_(gone), mine).values(state="offline")
                )

    # -- consumers ----------------------------------------------------------------------

    def cpu_layout(self) -> dict[str, cpu_sets.ConsumerCpus]:
        """Each served device's consumer CPUs and copy-helper budget (cpu_sets.py)."""
        kinds = {k: d.kind for k, d in self.devices.items()}
        return cpu_sets.host_layout(kinds, self.pin_cpus)

    def describe_cpus(self) -> list[str]:
        """One line per consumer: its CPUs and helper budget, for the agent's output."""
        lines = []
        for key, place in sorted(self.cpu_layout().items()):
            where = f"CPUs {cpu_sets.format_list(place.cpus)}" if place.cpus else "shared CPUs"
            budget = place.helper_budget
            extra = f", input-copy helper budget {budget}" if budget is not None else ""
            lines.append(f"{key}: {where}{extra}")
        return lines

    def _start_consumer(self, key: str) -> None:
        place = self.cpu_layout()[key]
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
        if place.cpus:
            cmd += ["--cpus", cpu_sets.format_list(place.cpus)]
        env = self._consumer_env(place.helper_budget)
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = (self.log_dir / f"{queue_for(key)}.log").open("a")
        self.consumers[key] = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
        if out is not None:
            out.close()  # the child holds its own descriptor

    def _consumer_env(self, helper_budget: int | None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop(BUDGET_ENV, None)  # the agent's to set, per consumer
        if helper_budget is not None:
            env[BUDGET_ENV] = str(helper_budget)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        return env

    def _start_group(self, number: int) -> subprocess.Popen:
        """Start group process `number` (worker_agent.group), fed devices on its stdin."""
        cmd = [sys.executable, "-m", "worker_agent.group", "--db", self.db_url]
        cmd += ["--broker", self.broker_url, "--loglevel", self.loglevel]
        grouped = [k for k, d in self.devices.items() if self.groups.takes(d)]
        place = self.cpu_layout().get(grouped[0]) if grouped else None
        if place is not None and place.cpus:  # grouped kinds share one set (cpu_sets.py)
            cmd += ["--cpus", cpu_sets.format_list(place.cpus)]
        out = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = (self.log_dir / f"group-{number}.log").open("a")
        env = self._consumer_env(None)
        proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=out, stderr=out, text=True
        )
        if out is not None:
            out.close()
        return proc

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

    def adopt_new_devices(self) -> list[str]:
        """Register and check devices `rediscover` finds that this agent does not serve yet
        (a phone attached after the start, or back after the agent restarted); their
        consumers start in the next round. One that another live agent holds is tried
        again each round: that agent may be a crashed one whose heartbeat has not run out."""
        found = [
            d for d in (self.rediscover() if self.rediscover else []) if d.key not in self.devices
        ]
        if not found:
            return []
        self.devices.update((d.key, d) for d in found)
        taken = self._claim_rows([d.key for d in found])
        for key, (agent, _) in taken.items():
            del self.devices[key]
            if key not in self._refused:  # said once; tried again every rediscover_s
                self.say(f"{key} is served by agent {agent}: refused while that agent is live")
                self._refused.add(key)
        new = [d.key for d in found if d.key in self.devices]
        for key in new:
            self._refused.discard(key)
            report = self.check(key)
            self.say(f"found {key}; canary {'ok' if report.ok else 'QUARANTINED'}")
        return new

    def supervise_once(self) -> None:
        """One round: adopt new devices when due, follow quarantine both ways, restart
        exited consumers."""
        if self.rediscover and (
            time.monotonic() - self._rediscovered_at >= self.timing.rediscover_s
        ):
            self._rediscovered_at = time.monotonic()
            self.adopt_new_devices()
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
        for key, device in self.devices.items():
            if key in self.quarantined or self.groups.takes(device):
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
        grouped = {k: d for k, d in self.devices.items() if self.groups.takes(d)}
        wanted = {k: d for k, d in grouped.items() if k not in self.quarantined}
        if grouped:
            self.groups.keep(wanted, self.say)  # a quarantined device is paused there

    # -- life cycle ---------------------------------------------------------------------

    def start(self, canary: bool = True) -> None:
        """Register, check health (unless done already), start consumers and supervising."""
        self.register()
        self.start_heartbeats()
        self.build_pools.ensure(self.devices.values())
        if canary:
            self.check_all()
        self.heartbeat()
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
        """Stop supervising, mark this agent's devices offline at once (no new job is sent
        to them; the reconciler moves what waits on their queues), then stop every consumer
        (a running job gets `grace_s` to finish)."""
        self._stop.set()
        for thread in (self._thread, self._beats):
            if thread is not None:
                thread.join(timeout=grace_s)
        try:
            self.mark_offline()
        except Exception as exc:  # noqa: BLE001 - the database may be the reason we stop
            log.warning("could not mark devices offline: %s", exc)
        self._stop_consumers(list(self.consumers), grace_s)
        self.groups.stop(grace_s)
        self.build_pools.stop()

    def mark_offline(self) -> None:
        """This agent's devices go offline now (those another agent serves are left alone)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(Device)
                .where(Device.key.in_(list(self.devices)), Device.agent == self.name)
                .values(state="offline")
            )

    def wait(self) -> None:
        """Block until stopped (SIGTERM/SIGINT stop the agent)."""
        while not self._stop.wait(1.0):
            pass
