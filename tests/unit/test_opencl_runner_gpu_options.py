"""The local OpenCL runner passes a gpu configuration's `quant` and `serialize` to our
delegate (BenchmarkOptions.enable_quant, .serialize_dir: GpuDelegateOptions' enable_quant
and serialization_dir), not only its precision."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm_core.configs import CONFIGS, parse_config
from worker_agent.devices import DeviceInfo
from worker_agent.runners.base import JobSpec
from worker_agent.runners.opencl import OpenclRunner
from worker_agent.runners.tools import SERIALIZED_DIR_NAME


def _options(config: str):
    c = CONFIGS.get(config) or parse_config(config)[0]
    spec = JobSpec(1, 1, Path("m.tflite"), "ab" * 32, c, {})
    runner = OpenclRunner(DeviceInfo("opencl:pocl:cpu", "opencl", facts={"opencl_spec": "0:0"}))
    return runner.options(spec)


@pytest.mark.parametrize(
    ("config", "precision", "quant", "serialized"),
    [
        ("gpu-fp32", "fp32", True, False),
        ("gpu:quant=false", "fp32", False, False),
        ("gpu:precision=fp16;serialize=true", "fp16", True, True),
        ("gpu:quant=false;serialize=true", "fp32", False, True),
    ],
)
def test_gpu_options_reach_the_delegate(config, precision, quant, serialized, tmp_path,
                                        monkeypatch) -> None:  # fmt: skip
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    opts = _options(config)
    assert (opts.use_gpu, opts.precision, opts.enable_quant) == (True, precision, quant)
    want = str(tmp_path / "devicefarm" / SERIALIZED_DIR_NAME) if serialized else None
    assert opts.serialize_dir == want
    assert opts.delegate_fields()["enable_quant"] is quant  # what results record


def test_session_options_carry_them(tmp_path, monkeypatch) -> None:
    """What the GPU session is opened with (TfLiteGpuDelegateOptionsV2's names)."""
    from delegate_runtime.examples import scaled_model
    from delegate_runtime.reader import read_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    got = _options("gpu:quant=false;serialize=true").gpu_session_options(
        read_model(scaled_model(2.0))
    )
    assert got["enable_quant"] is False
    assert got["serialization_dir"] == str(tmp_path / "devicefarm" / SERIALIZED_DIR_NAME)
