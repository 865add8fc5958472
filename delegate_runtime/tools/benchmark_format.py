"""The lines `benchmark_model` prints, character for character (REFERENCE.md).

Desktop builds prefix every line with `INFO: `; numbers print as C++ streams print them:
integers plainly, doubles with `%g` (so `avg` may read `1.04176e+06`).
"""

from __future__ import annotations

from typing import Any

from .stats import Stat, cpp_double

PREFIX = "INFO: "
GPU_DELEGATE_NAME = "TfLiteGpuDelegateV2"
MEMORY_NOTE = (
    "Note: as the benchmark tool itself affects memory footprint, the following is only "
    "APPROXIMATE to the actual memory footprint of the model at runtime. Take the "
    "information at your one's own risk."
)


def loaded_model(path: str) -> str:
    return f"Loaded model {path}"


def model_size(size_bytes: int) -> str:
    return f"The input model file size (MB): {cpp_double(size_bytes / 1e6)}"


def initialized(init_us: int) -> str:
    return f"Initialized session in {cpp_double(init_us / 1e3)}ms."


def running(min_runs: int, min_secs: float, max_secs: float) -> str:
    return (
        f"Running benchmark for at least {min_runs} iterations and at least "
        f"{cpp_double(min_secs)} seconds but terminate if exceeding {cpp_double(max_secs)} "
        "seconds."
    )


def stat_line(stat: Stat, percentiles: bool = True) -> str:
    return stat.format(percentiles)


def timings(init_us: int, first_us: int, warmup_avg_us: float, avg_us: float) -> str:
    return (
        f"Inference timings in us: Init: {init_us}, First inference: {first_us}, "
        f"Warmup (avg): {cpp_double(warmup_avg_us)}, Inference (avg): {cpp_double(avg_us)}"
    )


def memory_delta(init_mb: float, overall_mb: float) -> str:
    return (
        "Memory footprint delta from the start of the tool (MB): "
        f"init={cpp_double(init_mb)} overall={cpp_double(overall_mb)}"
    )


def peak_memory(peak_mb: float) -> str:
    return f"Overall peak memory footprint (MB) via periodic monitoring: {cpp_double(peak_mb)}"


def unsupported_ops(unsupported: list[dict[str, Any]], on_gpu: int, total: int) -> list[str]:
    """The GPU delegate's report of the ops it leaves to the CPU."""
    if not unsupported:
        return []
    lines = ["Following operations are not supported by GPU delegate:"]
    lines += [f"{u['op']}: {u['reason']}" for u in unsupported]
    if on_gpu == 0:
        lines.append(
            f"No operations will run on the GPU, and all {total} operations will run on the CPU."
        )
    else:
        lines.append(
            f"{on_gpu} operations will run on the GPU, and the remaining {total - on_gpu} "
            "operations will run on the CPU."
        )
    return lines


def replacing(delegated: int, total: int, partitions: int) -> str:
    return (
        f"Replacing {delegated} out of {total} node(s) with delegate ({GPU_DELEGATE_NAME}) "
        f"node, yielding {partitions} partitions"
    )


def applied(fully: bool, kernels: int) -> str:
    """Whether the delegate takes the whole graph (`benchmark_model`'s delegate line)."""
    if fully:
        return (
            "Explicitly applied GPU delegate, and the model graph will be completely "
            "executed by the delegate."
        )
    return (
        "Explicitly applied GPU delegate, and the model graph will be partially executed "
        f"by the delegate w/ {kernels} delegate kernels."
    )


def with_prefix(line: str, prefix: str = PREFIX) -> str:
    """A log line as a desktop build prints it (blank lines stay blank)."""
    return f"{prefix}{line}" if line else ""


def measurement_line(measurement: dict) -> str:
    """Ours: how the figures above were measured (configuration, path, uncertainty)."""
    u = measurement.get("uncertainty") or {}
    ci = u.get("ci95_us")
    ci_text = f" (95% CI {ci[0]:g}-{ci[1]:g})" if ci else ""
    cpu = u.get("cpu_time_per_inference_us")
    timing = measurement.get("timing") or {}
    return (
        f"Measured on the {timing.get('path', '?')} path, configuration "
        f"{measurement.get('fingerprint', '?')}: median {u.get('median_us', float('nan')):g} us"
        f"{ci_text}, warm-up {u.get('warmup_runs', 0)} runs "
        f"({'stable' if u.get('stable') else 'not stable'}), "
        f"CPU {'?' if cpu is None else f'{cpu:g}'} us per inference; "
        f"op profile: {timing.get('profile', 'none')}"
    )
