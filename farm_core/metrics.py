"""A result's derived figures, defined once: the CLI report, the dashboard's queries and the
allowlist all call these, so they agree on the same results.

Speed-up is per device: the device's CPU latency for the same model divided by its
latency in the row's configuration. A device that runs the `cpu` configuration itself (a
phone) is its own baseline, and only its own: a phone without a `cpu` run has no figure
(its lab host's x86 CPU is not the phone's). A desktop OpenCL GPU is compared with the CPU
reference device of its host, the CPU it actually sits beside. Never another machine's.

A new derived figure goes here (a function of result columns and of rows like those
below), is measured by a runner (worker_agent/runners) into the result, and is shown by
the page or report that wants it. One that SQL must aggregate over many results is also a
`results` column (schema.py and a migration) and an entry of `STORED_FIGURES`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

#: The configuration whose latency is every device's baseline.
CPU_CONFIG = "cpu"
#: The device kind of a host's CPU reference (`cpu:reference:<host>`).
CPU_REFERENCE_KIND = "cpu"
#: Device kinds that sit beside their host's CPU: without a `cpu` run of their own, the
#: host's CPU reference is theirs. Any other kind (a phone) has only its own.
HOST_CPU_KINDS = ("opencl",)


def speedup(cpu_us: float | None, avg_us: float | None) -> float | None:
    """CPU latency / this latency (2.0: twice as fast as the CPU); None when unknown."""
    if not cpu_us or avg_us is None or avg_us <= 0:
        return None
    return float(cpu_us) / float(avg_us)


def uses_host_cpu(kind: str | None) -> bool:
    """Whether a device of this kind may be compared with its host's CPU reference."""
    return kind in HOST_CPU_KINDS


def cpu_baseline(
    own_cpu_us: float | None, host_cpu_us: float | None, kind: str | None
) -> float | None:
    """A device's CPU latency: its own `cpu` result, else (for kinds beside their host's
    CPU) its host's CPU reference's; None when it has neither."""
    if own_cpu_us:
        return own_cpu_us
    return host_cpu_us if uses_host_cpu(kind) and host_cpu_us else None


def no_baseline_reason(kind: str | None) -> str:
    """Why a device of this kind has no CPU baseline, in words for reports."""
    if uses_host_cpu(kind):
        return "no CPU reference run on its host"
    return "no CPU run on this device"


def baselines(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(model, device) -> CPU baseline latency, from rows with the keys `model`, `device`,
    `host`, `kind`, `config` and `avg_us` (one or more rows per device and configuration:
    several are averaged). Devices without one are left out (`no_baseline_reason`)."""
    own: dict[tuple[str, str], list[float]] = defaultdict(list)
    host: dict[tuple[str, str], list[float]] = defaultdict(list)
    places: dict[tuple[str, str], tuple[str, str | None]] = {}
    for r in rows:
        places[(r["model"], r["device"])] = (r.get("host") or "", r.get("kind"))
        if r["config"] != CPU_CONFIG or not r.get("avg_us"):
            continue
        own[(r["model"], r["device"])].append(float(r["avg_us"]))
        if r.get("kind") == CPU_REFERENCE_KIND:
            host[(r["model"], r.get("host") or "")].append(float(r["avg_us"]))
    out = {}
    for (model, device), (where, kind) in places.items():
        mine, theirs = own.get((model, device)), host.get((model, where))
        base = cpu_baseline(
            statistics.fmean(mine) if mine else None,
            statistics.fmean(theirs) if theirs else None,
            kind,
        )
        if base:
            out[(model, device)] = base
    return out


def add_speedups(rows: Sequence[MutableMapping[str, Any]]) -> None:
    """Set each row's `speedup` (rows as `baselines` reads them)."""
    base = baselines(rows)
    for r in rows:
        r["speedup"] = speedup(base.get((r["model"], r["device"])), r.get("avg_us"))


def peak_memory_mb(benchmark: Mapping[str, Any]) -> float | None:
    """A benchmark record's peak memory (MB), stored as `results.peak_memory_mb`: the
    record's `peak_memory_mb` (every runner sets it), else its `memory.peak_mb` (the peak
    monitor's, or benchmark_model's `Overall peak memory footprint (MB) via periodic
    monitoring`); None when the run did not measure it (the tool prints -1 then)."""
    value = benchmark.get("peak_memory_mb")
    if value is None:
        memory = benchmark.get("memory")
        value = memory.get("peak_mb") if isinstance(memory, Mapping) else None
    try:
        mb = float(value)
    except (TypeError, ValueError):
        return None
    return mb if mb >= 0 and mb == mb else None  # not NaN


#: `results` column -> the figure it stores, derived from the benchmark record when a job
#: finishes (jobs.finish) unless the runner set the column itself.
STORED_FIGURES: dict[str, Callable[[Mapping[str, Any]], float | None]] = {
    "peak_memory_mb": peak_memory_mb,
}
