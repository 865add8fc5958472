"""The canary health check: a device whose canary loses an output is unhealthy."""

from __future__ import annotations

import numpy as np

from worker_agent import health
from worker_agent.runners.base import CanaryReading


class _Runner:
    """A runner whose canary returns the CPU reference's outputs, less `drop` of them."""

    def __init__(self, drop: int):
        self.drop = drop

    def canary(self, model_bytes: bytes, inputs: list[np.ndarray]) -> CanaryReading:
        outputs = list(health._reference())
        return CanaryReading(outputs[: len(outputs) - self.drop], 100.0)


def test_a_canary_with_the_reference_outputs_is_healthy() -> None:
    report = health.check(_Runner(drop=0))
    assert report.ok and not report.skipped, report.reason


def test_a_canary_missing_an_output_fails_rather_than_passing_on_fewer() -> None:
    report = health.check(_Runner(drop=1))
    assert not report.ok and "0 outputs, the CPU reference has 1" in report.reason
