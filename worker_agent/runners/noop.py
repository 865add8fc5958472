"""A device that does no model work: for tests and for measuring the farm's own overhead.

Options (from the device spec `noop:NAME?...`): `delay_s` sleeps that long per job (as its
`num_runs` runs, at most MAX_STEPS, each reported as progress),
`error=device|model|bug` raises that kind of error, `canary=fail|drift` fails its canary,
`canary_s` makes each canary take that long (a slow or loaded host), `alloc_mb` fills that
many MiB per job (a model that asks for too much memory).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from delegate_runtime.errors import DeviceError, ModelError

from .base import CanaryReading, JobSpec, Runner

#: What a no-op benchmark reports (figures in microseconds, as the benchmark tool's).
NOOP_FIGURE_US = 1.0
#: The most runs a delay is split into.
MAX_STEPS = 100


def _pass(seconds: float, runs: int, progress: Callable | None) -> None:
    """Sleep `seconds` as `runs` equal runs of a "benchmark" stage, reporting each."""
    if progress is not None:
        progress("benchmark", 0, runs)
    for done in range(1, runs + 1):
        time.sleep(seconds / runs)
        if progress is not None:
            progress("benchmark", done, runs)


class NoopRunner(Runner):
    kind = "noop"

    @property
    def options(self) -> dict[str, str]:
        return dict(self.device.facts.get("noop", {}))

    def benchmark(self, spec: JobSpec, path: str) -> dict[str, Any]:
        delay_s = float(self.options.get("delay_s", 0) or 0)
        n = int(spec.settings.get("num_runs", 1))
        if delay_s:
            _pass(delay_s, min(max(n, 1), MAX_STEPS), spec.progress)
        alloc_mb = int(self.options.get("alloc_mb", 0) or 0)
        if alloc_mb:  # a model that asks for too much memory
            np.ones(alloc_mb << 20, np.uint8)
        error = self.options.get("error", "")
        if error == "device":
            raise DeviceError(f"no-op device {self.device.key} failed on purpose")
        if error == "model":
            raise ModelError("no-op device rejects the model on purpose")
        if error == "bug":
            raise RuntimeError("no-op device hit a bug on purpose")
        return {
            "init_us": NOOP_FIGURE_US,
            "first_us": NOOP_FIGURE_US,
            "avg_us": NOOP_FIGURE_US,
            "median_us": NOOP_FIGURE_US,
            "p95_us": NOOP_FIGURE_US,
            "std_us": 0.0,
            "count": n,
            "delegation": {"nodes_delegated": 0, "nodes_total": 0, "partitions": 0},
            "log": "noop",
        }

    def diff(self, spec: JobSpec, path: str) -> dict[str, Any]:
        return {"num_runs": 0, "outputs": [{"avg_error": 0.0, "std_dev": 0.0}]}

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        mode = self.options.get("canary", "")
        time.sleep(float(self.options.get("canary_s", 0) or 0))
        if mode == "fail":
            raise DeviceError(f"no-op device {self.device.key} fails its canary on purpose")
        from delegate_runtime import read_model
        from delegate_runtime.session import make_session

        outputs = make_session(read_model(model_bytes)).invoke(inputs)
        if mode == "drift":
            outputs = [o + 1.0 for o in outputs]
        return CanaryReading(outputs, NOOP_FIGURE_US)
