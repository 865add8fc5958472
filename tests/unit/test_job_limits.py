"""The per-job memory limit leaves a GPU driver its reservation (worker_agent.limits).

NVIDIA's driver reserves tens of GiB of address space when its first context opens; a
limit of "current size + 4 GiB" taken before that starved it (every GPU job failed with
"no OpenCL device found"). The stand-in driver here reserves 8 GiB the same way (an
anonymous mapping that commits nothing).
"""

from __future__ import annotations

import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from worker_agent import health
from worker_agent.limits import ENV_JOB_MEMORY_MB, RuntimeOpened, memory_limit, under_job_limits
from worker_agent.runners.base import CanaryReading

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux only")

DRIVER_RESERVATION = 8 << 30


class _Device:
    def __init__(self, key: str):
        self.key = key


class DriverLikeRunner:
    """A runner whose runtime reserves address space on opening, as GPU drivers do."""

    def __init__(self, key: str, canary_bytes: int = 0):
        self.device = _Device(key)
        self.reservations: list[mmap.mmap] = []
        self.canary_bytes = canary_bytes

    def open_runtime(self) -> int:
        self.reservations.append(
            mmap.mmap(
                -1,
                DRIVER_RESERVATION,
                flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ,
            )  # fmt: skip
        )
        return 1234

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        if self.canary_bytes:
            np.ones(self.canary_bytes, np.uint8)
        from delegate_runtime import read_model
        from delegate_runtime.session import make_session

        outputs = make_session(read_model(model_bytes)).invoke(inputs)
        return CanaryReading(outputs, 1.0)


def test_the_driver_opens_before_the_limit_and_its_reservation_is_measured(monkeypatch):
    monkeypatch.setenv(ENV_JOB_MEMORY_MB, "256")
    runner = DriverLikeRunner("stand-in:driver-a")
    with under_job_limits(runner) as opened:
        assert isinstance(opened, RuntimeOpened)
        assert opened.process_us == 1234
        assert opened.driver_reserved_mb >= DRIVER_RESERVATION / (1 << 20) * 0.99
        buf = np.ones(64 << 20, np.uint8)  # a model's 64 MiB fits the 256 MiB budget
        assert int(buf[-1]) == 1
        with pytest.raises(MemoryError):
            np.ones(512 << 20, np.uint8)  # past the budget: the model's fault
    with under_job_limits(runner) as again:  # opened once per process
        assert again is opened
    assert len(runner.reservations) == 1


def test_a_limit_taken_before_the_driver_opens_starves_it():
    """What the farm did before: the reservation fails under the job's limit."""
    runner = DriverLikeRunner("stand-in:driver-b")
    with memory_limit(256), pytest.raises(OSError):
        runner.open_runtime()


def test_the_canary_runs_under_the_jobs_limit(monkeypatch):
    monkeypatch.setenv(ENV_JOB_MEMORY_MB, "128")
    healthy = health.check_guarded(DriverLikeRunner("stand-in:canary-ok"))
    assert healthy.ok, healthy.reason
    greedy = health.check_guarded(DriverLikeRunner("stand-in:canary-big", 1 << 30))
    assert not greedy.ok
    assert "MemoryError" in greedy.reason


def test_a_runtime_that_cannot_open_fails_the_canary():
    class Broken(DriverLikeRunner):
        def open_runtime(self) -> int:
            from delegate_runtime.errors import DeviceError

            raise DeviceError("no OpenCL device found")

    report = health.check_guarded(Broken("stand-in:broken"))
    assert not report.ok
    assert "no OpenCL device found" in report.reason


def test_a_tools_runner_reports_the_process_cost_once_on_its_first_job():
    """The first job after `open_runtime` carries what the process paid (its Init)."""
    code = textwrap.dedent(
        """
        from worker_agent.devices import DeviceInfo
        from worker_agent.runners.cpu import CpuRunner
        r = CpuRunner.__new__(CpuRunner)
        paid = r.open_runtime()
        first = {"init_us": 100, "init_process_us": 0}
        r._report_process_cost(first)
        second = {"init_us": 100, "init_process_us": 0}
        r._report_process_cost(second)
        assert paid > 0, paid
        assert first == {"init_us": 100 + paid, "init_process_us": paid}, (first, paid)
        assert second == {"init_us": 100, "init_process_us": 0}, second
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
