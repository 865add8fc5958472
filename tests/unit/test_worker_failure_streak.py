"""Which job endings count against a device (worker_agent/failure_streak.py)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import DeviceError, JobError, ModelError
from farm_core.schema import FAILED, TIMED_OUT
from tests.support.farm import write_model
from worker_agent.android.runner import ToolOutputError
from worker_agent.failure_streak import device_fault


def _add_v99() -> bytes:
    """Read by the reader, refused by the CPU reference (no kernel for ADD version 99)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32)
    y = g.tensor("y", (1, 4), np.float32)
    g.op("ADD", [x, g.const("w", np.ones((1, 4), np.float32))], [y], version=99)
    g.output(y)
    return b.build()


@pytest.fixture
def cached(tmp_path):
    """A consumer context whose model cache holds a good model and a refused one."""
    (tmp_path / "models").mkdir()
    good = write_model(tmp_path / "good.tflite").read_bytes()
    shas = {}
    for name, data in {"good": good, "refused": _add_v99()}.items():
        sha = hashlib.sha256(data).hexdigest()
        (tmp_path / "models" / f"{sha}.tflite").write_bytes(data)
        shas[name] = sha
    return SimpleNamespace(cache_dir=tmp_path), shas


CRASH = ToolOutputError("benchmark_model on android:x gave no result", "Segmentation fault")


def test_a_tool_crash_on_a_model_the_reference_runs_is_the_devices(cached) -> None:
    ctx, shas = cached
    assert device_fault(ctx, FAILED, CRASH, shas["good"])


def test_a_tool_crash_on_a_model_the_reference_refuses_is_the_models(cached) -> None:
    ctx, shas = cached
    assert not device_fault(ctx, FAILED, CRASH, shas["refused"])


@pytest.mark.parametrize(
    "state, exc, counts",
    [
        (TIMED_OUT, None, True),
        (FAILED, ModelError("unsupported op"), False),
        (FAILED, JobError("bad settings"), False),
        (FAILED, RuntimeError("a bug"), False),
        (FAILED, DeviceError("moved, counted as its attempt"), False),
    ],
    ids=["time-limit", "model", "job", "bug", "device-error"],
)
def test_other_endings(cached, state, exc, counts) -> None:
    ctx, shas = cached
    assert device_fault(ctx, state, exc, shas["good"]) is counts
