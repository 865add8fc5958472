"""Where the farm lives (database, broker) and its timings, from the environment.

The embedded default needs no server: a SQLite file and a filesystem broker under one
folder, the farm's home: `devicefarm --home DIR`, else `DEVICEFARM_HOME`, else the user's
data directory as the platform names it (`~/.local/share/devicefarm` on Linux), so every
command finds the same farm from any folder. The distributed mode sets `DEVICEFARM_DB`
(e.g. postgresql://...) and `DEVICEFARM_BROKER` (e.g. redis://...).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

ENV_HOME = "DEVICEFARM_HOME"
ENV_DB = "DEVICEFARM_DB"
ENV_BROKER = "DEVICEFARM_BROKER"
#: The broker transports the farm configures (celery_app.transport_options): Redis, over
#: TLS too, and kombu's filesystem one for the embedded mode; others (amqp, memory) are
#: refused by name.
BROKER_TRANSPORTS = ("redis", "rediss", "filesystem")

#: Redis redelivers an unacknowledged message after this long; every job limit stays below it.
VISIBILITY_TIMEOUT_S = 4 * 3600
#: A job's soft time limit (SoftTimeLimitExceeded inside the job) and hard limit (kill).
JOB_SOFT_LIMIT_S = 3600
JOB_HARD_LIMIT_S = JOB_SOFT_LIMIT_S + 120
assert JOB_HARD_LIMIT_S < VISIBILITY_TIMEOUT_S, "hard time limit must sit inside visibility"

#: Infrastructure failures (DeviceError, worker lost) a job may have before it fails.
MAX_FAILURES = 3
#: Retry backoff: BACKOFF_BASE_S * 2**(failures-1), capped.
BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 60.0
#: A database or Redis server that has not answered a new connection within this long is
#: unreachable: a command says so in one line instead of waiting on the network.
CONNECT_TIMEOUT_S = 5


def default_home() -> Path:
    """The user's data directory for the farm, as each platform's convention names it."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:  # the XDG base directory spec
        base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "devicefarm"


def home() -> Path:
    """The embedded mode's folder (database file, broker folder, model cache, logs)."""
    return Path(os.environ.get(ENV_HOME) or default_home()).absolute()


#: Where the embedded farm lived before it had a home of its own: the current folder's.
LEGACY_HOME = Path(".devicefarm")


def new_home_notice() -> str | None:
    """What to tell a user whose command is about to create the embedded farm (its first
    use), or None when the farm exists or the database is not the embedded one."""
    if os.environ.get(ENV_DB) or (home() / "farm.db").exists():
        return None
    notice = (
        f"devicefarm: a new embedded farm in {home()} (database, broker, logs); every command "
        f"finds it from any folder; --home DIR or ${ENV_HOME} chooses another"
    )
    legacy = LEGACY_HOME.absolute()
    if (legacy / "farm.db").exists() and legacy != home():
        notice += (
            f"\n  note: {legacy} holds a farm from an earlier version: --home {legacy} uses it"
        )
    return notice


def default_db_url() -> str:
    return os.environ.get(ENV_DB) or f"sqlite:///{home() / 'farm.db'}"


def default_broker_url() -> str:
    return os.environ.get(ENV_BROKER) or f"filesystem://{home() / 'broker'}"


@dataclass(frozen=True)
class Timing:
    """Liveness timings. Each can be overridden by `DEVICEFARM_<NAME>` (e.g. for tests)."""

    heartbeat_s: float = 10.0  #: agents mark their devices alive this often
    offline_after_s: float = 35.0  #: a device with no heartbeat for this long is offline
    lease_s: float = 60.0  #: a running job's lease; renewed every lease_s / 3 while it runs
    device_gone_s: float = 900.0  #: jobs waiting this long on a lost device are expired
    dispatch_grace_s: float = 30.0  #: the reconciler leaves fresh messages this long
    #: a message the broker lacks is lost once it has lacked it this long: a consumer holds
    #: a message Redis popped for it, unread, for seconds under load (17-20 s seen in a
    #: 1,000-device fleet: bench/bench_fleet.py), in no list and not yet in unacked
    lost_confirm_s: float = 60.0
    health_retry_s: float = 120.0  #: a quarantined device's canary is retried this often
    canary_every_jobs: int = 50  #: a device re-runs its canary after this many jobs
    #: an online device that has claimed nothing for this long while a message waits on its
    #: queue is stalled (quarantined, so its agent restarts its consumer); above the longest
    #: retry backoff
    stall_after_s: float = 300.0
    rediscover_s: float = 30.0  #: agents look for newly attached phones this often
    #: a reconcile pass begins parts of bulk work (moves, the fill) until this long after
    #: its start; the rest is the next pass's (orchestrator.pass_budget)
    pass_budget_s: float = 0.5
    #: a pass looks for lost messages and stalls on at most this many live devices, those
    #: it looked at longest ago (orchestrator.look_turns): a large fleet in turn
    probe_devices: int = 250

    @classmethod
    def from_env(cls) -> Timing:
        """Defaults, overridden by any `DEVICEFARM_<FIELD>` set in the environment."""
        changes: dict[str, float | int] = {}
        for f in fields(cls):
            raw = os.environ.get(f"DEVICEFARM_{f.name.upper()}")
            if raw is not None:
                changes[f.name] = int(raw) if f.type == "int" else float(raw)
        return replace(cls(), **changes)
