"""Runner backends by device kind, imported only when a device of that kind is served."""

from __future__ import annotations

import importlib

from delegate_runtime.errors import JobError

from ..devices import DeviceInfo
from .base import CanaryReading, JobSpec, Runner, RunOutcome

#: device kind -> "module:Class" of its runner
RUNNERS = {
    "cpu": "worker_agent.runners.cpu:CpuRunner",
    "opencl": "worker_agent.runners.opencl:OpenclRunner",
    "noop": "worker_agent.runners.noop:NoopRunner",
    "android": "worker_agent.android.runner:AdbRunner",
}


def make_runner(device: DeviceInfo) -> Runner:
    """The runner for `device`, by its kind."""
    target = RUNNERS.get(device.kind)
    if target is None:
        raise JobError(f"no runner for device kind {device.kind!r} ({', '.join(RUNNERS)})")
    module, _, cls = target.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)(device)
    except ImportError as exc:
        raise JobError(f"the {device.kind} runner is not available: {exc}") from exc


__all__ = ["RUNNERS", "CanaryReading", "JobSpec", "RunOutcome", "Runner", "make_runner"]
