"""The runner base class: how an agent runs a job on one device, whatever the backend.

A backend (one file per backend: cpu.py, opencl.py, noop.py; the adb runner in
worker_agent/android) subclasses Runner and fills in a few hooks:

    setup()               open the device (runs in the process that will run the jobs)
    open_runtime() -> int pay the runtime's once-per-process costs (driver context) now
    prepare(spec) -> str  make the model reachable on the device (e.g. adb push); a path
    benchmark(spec, path) -> dict   every figure of the benchmark tool
    diff(spec, path) -> dict        inference diff against the CPU reference
    canary() -> CanaryReading       run the small canary model once (health checks)
    versions() -> dict              software versions to store with each result
    teardown()

`run(spec)` strings them together; `supports(config)` says why a configuration cannot run.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from farm_core.configs import RunConfig, supports

from ..devices import DeviceInfo


@dataclass(frozen=True)
class JobSpec:
    """One job as a runner sees it."""

    job_id: int
    attempt: int
    model_path: Path
    model_sha256: str
    config: RunConfig
    settings: dict[str, Any]
    #: the tools' progress(stage, done, total) callback (job_progress.JobProgress: the
    #: executor's reaches the job's row); None reports nothing
    progress: Callable[[str, int, int | None], None] | None = None


@dataclass
class RunOutcome:
    """What a job measured."""

    benchmark: dict[str, Any] = field(default_factory=dict)
    diff: dict[str, Any] = field(default_factory=dict)
    delegation: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    log: str = ""


@dataclass
class CanaryReading:
    """The canary model's outputs on the device and its latency."""

    outputs: list[np.ndarray]
    latency_us: float


@functools.lru_cache(maxsize=1)
def _package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        out["devicefarm"] = version("devicefarm")
    except PackageNotFoundError:
        out["devicefarm"] = "source"
    return out


class Runner:
    """Runs jobs on one device. Subclasses set `kind` and fill in the hooks."""

    kind: ClassVar[str] = ""

    def __init__(self, device: DeviceInfo):
        self.device = device

    def supports(self, config: RunConfig) -> tuple[bool, str]:
        """Whether this runner's device kind runs `config` (farm_core.configs decides)."""
        return supports(self.kind, config.name)

    # -- hooks --------------------------------------------------------------------------

    def setup(self) -> None:
        """Open the device; called once, in the process that runs the jobs."""

    def open_runtime(self) -> int:
        """Pay the once-per-process costs of this device's runtime (modules, the driver's
        context) before any job or canary, outside their memory limit; returns the
        microseconds spent. Called once per process (worker_agent.limits)."""
        return 0

    def prepare(self, spec: JobSpec) -> str:
        """Make the model reachable where the tools run; returns its path there."""
        return str(spec.model_path)

    def benchmark(self, spec: JobSpec, path: str) -> dict[str, Any]:
        raise NotImplementedError

    def diff(self, spec: JobSpec, path: str) -> dict[str, Any]:
        return {}

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        raise NotImplementedError

    def versions(self) -> dict[str, Any]:
        return dict(_package_versions())

    def teardown(self) -> None:
        """Release the device."""

    # -- the template -------------------------------------------------------------------

    def run(self, spec: JobSpec) -> RunOutcome:
        """Prepare, benchmark and (for delegated configurations) diff one job."""
        from delegate_runtime.errors import JobError

        ok, why = self.supports(spec.config)
        if not ok:
            raise JobError(why)
        path = self.prepare(spec)
        bench = self.benchmark(spec, path)
        want_diff = spec.config.delegated and spec.settings.get("diff_runs", 0) > 0
        diff = self.diff(spec, path) if want_diff else {}
        return RunOutcome(
            benchmark=bench,
            diff=diff,
            delegation=dict(bench.get("delegation") or {}),
            versions=self.versions(),
            log="\n".join(str(x.get("log") or "") for x in (bench, diff) if x.get("log")),
        )
