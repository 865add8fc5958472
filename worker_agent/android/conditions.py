"""Measurement hygiene: a phone's temperatures and clocks around each run, and a cooldown
between runs, so that noisy results can be told apart.

Read through sync (LIST and RECV), not the shell: no globs, one answer per file, and a
file the shell user cannot read is simply left out.
"""

from __future__ import annotations

import re
import time
from typing import Any

from delegate_runtime.errors import DeviceError

from .sync import SyncFailed, SyncSession

THERMAL_DIR = "/sys/class/thermal"
CPU_DIR = "/sys/devices/system/cpu"
DEVFREQ_DIR = "/sys/class/devfreq"
KGSL_CLOCK = "/sys/class/kgsl/kgsl-3d0/gpuclk"
#: devfreq entries that are GPUs (Mali's `*.mali`, Adreno's `*kgsl-3d0`, generic `*gpu*`).
_GPU_DEVFREQ = re.compile(r"mali|kgsl|gpu", re.I)
_CPU = re.compile(r"^cpu\d+$")
#: Thermal readings above this are millidegrees (most kernels); below, degrees.
MILLI_THRESHOLD = 1000
#: How often a hot phone is read again while it cools down.
COOL_POLL_S = 2.0


def _number(session: SyncSession, path: str) -> int | None:
    try:
        text = session.recv(path).decode("ascii", "replace").strip()
    except SyncFailed:
        return None
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def _text(session: SyncSession, path: str) -> str:
    try:
        return session.recv(path).decode("utf-8", "replace").strip()
    except SyncFailed:
        return ""


def thermal_c(session: SyncSession, types: dict[str, str] | None = None) -> dict[str, float]:
    """Zone type -> degrees C, for every readable thermal zone (`types` caches the zones'
    types, which do not change while a phone runs)."""
    types = {} if types is None else types
    out: dict[str, float] = {}
    for e in session.list(THERMAL_DIR):
        if not e.name.startswith("thermal_zone"):
            continue
        raw = _number(session, f"{THERMAL_DIR}/{e.name}/temp")
        if raw is None:
            continue
        if e.name not in types:
            types[e.name] = _text(session, f"{THERMAL_DIR}/{e.name}/type") or e.name
        kind = types[e.name]
        name = kind if kind not in out else f"{kind}@{e.name}"
        out[name] = raw / 1000.0 if abs(raw) >= MILLI_THRESHOLD else float(raw)
    return out


def clocks(session: SyncSession) -> dict[str, dict[str, int]]:
    """CPU clocks (kHz, per CPU) and GPU clocks (Hz, per devfreq device or kgsl)."""
    cpus: dict[str, int] = {}
    for e in sorted(
        session.list(CPU_DIR), key=lambda e: int(e.name[3:]) if _CPU.match(e.name) else -1
    ):
        if _CPU.match(e.name):
            khz = _number(session, f"{CPU_DIR}/{e.name}/cpufreq/scaling_cur_freq")
            if khz is not None:
                cpus[e.name] = khz
    gpus: dict[str, int] = {}
    for e in session.list(DEVFREQ_DIR):
        if _GPU_DEVFREQ.search(e.name):
            hz = _number(session, f"{DEVFREQ_DIR}/{e.name}/cur_freq")
            if hz is not None:
                gpus[e.name] = hz
    if session.stat(KGSL_CLOCK).exists:
        hz = _number(session, KGSL_CLOCK)
        if hz is not None:
            gpus["kgsl-3d0"] = hz
    return {"cpu_khz": cpus, "gpu_hz": gpus}


def read(session: SyncSession, types: dict[str, str] | None = None) -> dict[str, Any]:
    """One reading: temperatures, clocks, and when (Unix time)."""
    try:
        return {"at": time.time(), "thermal_c": thermal_c(session, types), **clocks(session)}
    except DeviceError:
        raise
    except Exception as exc:  # noqa: BLE001 - odd sysfs content must not fail the job
        return {"at": time.time(), "error": f"{type(exc).__name__}: {exc}"}


def hottest(reading: dict[str, Any]) -> float | None:
    temps = [t for t in reading.get("thermal_c", {}).values() if t is not None]
    return max(temps) if temps else None


def cool_down(
    session: SyncSession,
    since_last_s: float | None,
    cooldown_s: float,
    max_temp_c: float | None,
    max_wait_s: float,
    types: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Wait out the cooldown since the last run, then (when `max_temp_c` is set) until the
    hottest zone is below it or `max_wait_s` passed; returns the reading taken last and
    how long it waited."""
    start = time.monotonic()
    if since_last_s is not None and since_last_s < cooldown_s:
        time.sleep(cooldown_s - since_last_s)
    reading = read(session, types)
    while max_temp_c is not None and (hot := hottest(reading)) is not None and hot > max_temp_c:
        if time.monotonic() - start >= max_wait_s:
            reading["still_hot"] = True
            break
        time.sleep(COOL_POLL_S)
        reading = read(session, types)
    reading["waited_s"] = round(time.monotonic() - start, 3)
    return reading
