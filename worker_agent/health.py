"""Device health: a small canary model run on the device and compared with the CPU reference.

A device whose canary fails, gives outputs that drift from the reference, or runs far slower
than its own baseline is quarantined: it receives no jobs until its canary passes again.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, update

from delegate_runtime.errors import DevicefarmError, ModelError
from farm_core.schema import HEALTHY, QUARANTINED, Device, utcnow

from .runners.base import Runner

#: Largest absolute difference from the CPU reference a healthy canary may show (fp32).
CANARY_TOLERANCE = 1e-3
#: A canary slower than this many times its device's first healthy latency is drift.
LATENCY_DRIFT_FACTOR = 10.0
CANARY_SHAPE = (1, 8, 8, 4)
CANARY_SEED = 20240101


@dataclass
class HealthReport:
    ok: bool
    reason: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False  #: the canary could not be built or run by this runtime


@functools.lru_cache(maxsize=1)
def canary_model() -> tuple[bytes, tuple[np.ndarray, ...]]:
    """The canary: y = relu(x * w + b), elementwise, on a small tensor; and its input."""
    from delegate_runtime.builder import ModelBuilder

    rng = np.random.default_rng(CANARY_SEED)
    b = ModelBuilder(description="devicefarm canary")
    g = b.main
    x = g.input("x", CANARY_SHAPE, np.float32)
    w = g.const("w", rng.uniform(0.5, 1.5, CANARY_SHAPE).astype(np.float32))
    c = g.const("b", rng.uniform(-0.5, 0.5, CANARY_SHAPE).astype(np.float32))
    m = g.tensor("m", CANARY_SHAPE, np.float32)
    y = g.tensor("y", CANARY_SHAPE, np.float32)
    g.op("MUL", [x, w], [m])
    g.op("ADD", [m, c], [y], fused_activation_function="RELU")
    g.output(y)
    inputs = (rng.uniform(-1, 1, CANARY_SHAPE).astype(np.float32),)
    return b.build(), inputs


@functools.lru_cache(maxsize=1)
def _reference() -> list[np.ndarray]:
    from delegate_runtime import read_model
    from delegate_runtime.session import make_session

    data, inputs = canary_model()
    return make_session(read_model(data)).invoke(list(inputs))


def check(runner: Runner, baseline: dict[str, Any] | None = None) -> HealthReport:
    """Run the canary on `runner`'s device; compare outputs and latency."""
    try:
        data, inputs = canary_model()
        reference = _reference()
    except ModelError as exc:  # this runtime build cannot run the canary's ops yet
        return HealthReport(True, f"canary skipped: {exc}", skipped=True)
    try:
        reading = runner.canary(data, list(inputs))
    except NotImplementedError:
        return HealthReport(True, "canary skipped: the runner has none", skipped=True)
    except (DevicefarmError, RuntimeError, OSError) as exc:
        return HealthReport(False, f"canary failed: {type(exc).__name__}: {exc}")
    if len(reading.outputs) != len(reference):
        return HealthReport(
            False,
            f"canary failed: {len(reading.outputs)} outputs, the CPU reference has "
            f"{len(reference)}",
        )
    diff = max(
        (
            float(np.max(np.abs(np.asarray(o, np.float64) - r)))
            if o.shape == r.shape
            else float("inf")
        )
        for o, r in zip(reading.outputs, reference, strict=True)
    )
    figures = {"latency_us": reading.latency_us, "max_abs_diff": diff}
    if not diff <= CANARY_TOLERANCE:
        return HealthReport(
            False,
            f"canary drift: outputs differ from the CPU reference by "
            f"{diff:.3g} (tolerance {CANARY_TOLERANCE:g})",
            figures,
        )
    base = (baseline or {}).get("latency_us")
    if base and reading.latency_us > LATENCY_DRIFT_FACTOR * base:
        return HealthReport(
            False,
            f"canary drift: {reading.latency_us:.0f} us, over "
            f"{LATENCY_DRIFT_FACTOR:g}x its baseline {base:.0f} us",
            figures,
        )
    return HealthReport(True, "", figures)


def check_guarded(
    runner: Runner, baseline: dict[str, Any] | None = None, memory: bool = True
) -> HealthReport:
    """`check` under the conditions a job runs under (worker_agent.limits): the runtime
    opened first, then the job's memory limit (unless `memory` is False, as a device
    group's jobs run); a runtime that cannot open is unhealthy."""
    from .limits import under_job_limits

    try:
        with under_job_limits(runner, memory):
            return check(runner, baseline)
    except (DevicefarmError, RuntimeError, OSError, MemoryError) as exc:
        return HealthReport(False, f"canary failed: {type(exc).__name__}: {exc}")


def record(
    engine: Engine, device_key: str, report: HealthReport, baseline: dict[str, Any] | None
) -> None:
    """Store a device's health; the first healthy canary becomes its latency baseline."""
    with engine.begin() as conn:
        record_on(conn, device_key, report, baseline)


def record_on(
    conn: Connection, device_key: str, report: HealthReport, baseline: dict[str, Any] | None
) -> None:
    """`record` in one statement on `conn` (a consumer's own connection)."""
    values: dict[str, Any] = {
        "health": HEALTHY if report.ok else QUARANTINED,
        "health_reason": report.reason or "",
    }
    if report.ok and not report.skipped and not (baseline or {}).get("latency_us"):
        values["health_baseline"] = report.figures | {"at": utcnow().isoformat()}
    conn.execute(update(Device).where(Device.key == device_key).values(**values))
