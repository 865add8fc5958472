"""A cold session's first tier (delegate_runtime/gpu/opencl/first_tier.py): it runs its
first inferences on the generic kernels, a unit each that every model shares, while its
own program (specialized copies, persistent kernels) builds, then swaps its own in; on a
real OpenCL device (PoCL in CI, where the tier is forced: at its default it holds on GPUs
only), against the own program's outputs to the bit and LiteRT's reference kernels."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from delegate_runtime import read_model
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import check_against_litert
from tests.ops.test_gpu_ops import opencl_device
from tests.ops.test_gpu_persistent import _one_group_per_unit, separable_blocks

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests


@pytest.fixture
def tiered(monkeypatch) -> None:
    """Sessions with their own programs (specialized, persistent kernels) that start on
    the first tier where their own is not cached."""
    _one_group_per_unit(monkeypatch)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "1")
    monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "1")


def _session(model: bytes, cache: Path, **options):
    from delegate_runtime.gpu.delegate import GpuSession

    return GpuSession(read_model(model), log=io.StringIO(), serialization_dir=str(cache), **options)


def _enqueued(session) -> list[str]:
    return [k.function_name for ex in session.executors for k, _, _ in ex.enqueued]


def test_a_cold_session_starts_on_the_generic_kernels_then_swaps_its_own_in(
    opencl_device, tiered, monkeypatch, tmp_path
):
    """Cold: the launches run the generic kernels (no copies, no persistent kernel), one
    unit each; settle() waits for its own program and swaps it in: a persistent kernel,
    the phases of its build and swap recorded; every output equal to the bit to a session
    that waited for its own program, and within LiteRT's reference kernels' tolerance."""
    model, inputs = separable_blocks()
    monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "0")
    want = check_against_litert(model, inputs, "fp32", runs=1).invoke(inputs)
    monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "1")
    session = _session(model, tmp_path)
    generic = {"conv2d_direct", "depthwise3x3_c4", "gemm32v", "gemm64v"}
    assert session.first_tier_units == len(set(_enqueued(session)))
    assert "__" not in "".join(_enqueued(session)), _enqueued(session)
    assert session.program_summary.startswith(f"first tier {session.first_tier_units} units")
    first = session.invoke(inputs)
    assert session.settle() >= 0.0
    assert _enqueued(session) == ["persistent0_0"]
    assert session.program_summary.endswith("after a first tier")
    assert {"own_program", "own_swap", "own_program_wait"} <= session.init_phases_ms.keys()
    assert session.settle() == 0.0  # nothing pending any more
    for got, own, w in zip(first, session.invoke(inputs), want, strict=True):
        np.testing.assert_array_equal(got, w)
        np.testing.assert_array_equal(own, w)
    assert set(_enqueued(_session(model, tmp_path / "other"))) & generic


def test_an_invoke_after_the_build_runs_the_own_program(opencl_device, tiered, tmp_path):
    """A session never asked to settle swaps its own program in at the first invoke after
    the build ended (an app's loop gets it without asking)."""
    model, inputs = separable_blocks(blocks=1)
    session = _session(model, tmp_path)
    session._own_program.result()  # the build ended
    assert "__" not in "".join(_enqueued(session))
    session.invoke(inputs)
    assert _enqueued(session) == ["persistent0_0"]
    assert session.first_tier_units > 0  # it did start on the first tier


def test_a_warm_session_and_another_models_first_tier(opencl_device, tiered, tmp_path):
    """A session whose own program the cache holds starts on it (no first tier); another
    model with the same ops (one block more: another own program) finds every unit of its
    first tier in the cache, as each model on a host does after the first."""
    model, _ = separable_blocks(blocks=1)
    _session(model, tmp_path).settle()
    warm = _session(model, tmp_path)
    assert warm.first_tier_units == 0 and warm.program_from_cache
    assert _enqueued(warm) == ["persistent0_0"]
    other, _ = separable_blocks(blocks=2)
    again = _session(other, tmp_path)
    assert again.first_tier_units > 0 and not again.program_from_cache
    assert again.program_summary.startswith(
        f"first tier {again.first_tier_units} units from cache"
    ), again.program_summary


def test_a_benchmark_times_the_own_program_and_records_the_first_tier(
    opencl_device, tiered, tmp_path
):
    """The benchmark's first inference runs on the first tier, every later run on the own
    program (its log says so); the record names the first tier's units, outside the
    fingerprint: a cold run and a warm one (no first tier) measured the same path."""
    from delegate_runtime.tools.benchmark import BenchmarkOptions, run_benchmark

    model, _ = separable_blocks(blocks=1)
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    options = BenchmarkOptions(
        use_gpu=True, num_runs=3, warmup_runs=2, serialize_dir=str(tmp_path / "cache")
    )
    cold = run_benchmark(str(path), options, out=io.StringIO())
    warm = run_benchmark(str(path), options, out=io.StringIO())
    assert "First inference on the first tier" in cold.log
    assert "first tier" not in warm.log
    units = cold.measurement["config"]["gpu.session.first_tier_units"]["value"]
    assert units > 0
    assert "gpu.session.first_tier_units" not in warm.measurement["config"]
    assert cold.measurement["fingerprint"] == warm.measurement["fingerprint"]
    assert cold.init_phases_ms["own_program"] > 0


def test_no_first_tier_where_the_session_profiles_or_the_switch_is_off(
    opencl_device, tiered, monkeypatch, tmp_path
):
    """A profiling session times each launch of the path it reports: it waits for its own
    program; so does a session with the switch off."""
    model, _ = separable_blocks(blocks=1)
    assert _session(model, tmp_path / "p", profiling=True).first_tier_units == 0
    monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "0")
    assert _session(model, tmp_path / "off").first_tier_units == 0


def test_with_the_switch_off_nothing_is_left_to_the_builders(opencl_device, monkeypatch, tmp_path):
    """A session with the first tier switched off posts no unattended job for it."""
    from delegate_runtime.gpu.opencl import build_pool, build_workers
    from delegate_runtime.gpu.opencl.runtime import select_device

    _one_group_per_unit(monkeypatch)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "0")
    spec = build_workers.device_spec(select_device(opencl_device))
    procs = build_pool.start_pool(spec, tmp_path, 1)
    try:
        posted = []
        monkeypatch.setattr(build_pool, "post_job", lambda spool, job: posted.append(job))
        _session(separable_blocks(blocks=1)[0], tmp_path)
        assert posted == []
    finally:
        build_pool.stop_pool(procs)


def test_a_session_that_waits_for_its_own_leaves_the_tier_to_the_builders(
    opencl_device, monkeypatch, tmp_path
):
    """At the switch's default a session with nothing of the tier cached waits for its own
    program (here: a CPU device, where the default never tiers) and posts the tier's units
    to the host's resident builders, unattended: they build them and retire the job; the
    next model finds every unit of its first tier in the cache."""
    from delegate_runtime.gpu.opencl import build_pool, build_workers
    from delegate_runtime.gpu.opencl.runtime import select_device
    from labkit.processes import wait_until

    _one_group_per_unit(monkeypatch)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    spec = build_workers.device_spec(select_device(opencl_device))
    procs = build_pool.start_pool(spec, tmp_path, 2)
    jobs = build_pool.spool_dir(tmp_path, spec) / "jobs"
    try:
        first, _ = separable_blocks(blocks=1)
        waited = _session(first, tmp_path)
        assert waited.first_tier_units == 0 and "first tier" not in waited.program_summary
        wait_until(lambda: jobs.is_dir() and not any(jobs.iterdir()), 600, "the tier's units built")
        monkeypatch.setenv("DEVICEFARM_GPU_FIRST_TIER", "1")
        later, _ = separable_blocks(blocks=2)
        again = _session(later, tmp_path)
        assert again.program_summary.startswith(
            f"first tier {again.first_tier_units} units from cache"
        ), again.program_summary
    finally:
        build_pool.stop_pool(procs)


def test_the_builders_warm_up_holds_every_models_first_tier(opencl_device, tiered, tmp_path):
    """The tier's units are cut from the whole library, so two models of different ops
    (one with a SOFTMAX, whose kernel file the other's program lacks) share each generic
    kernel's unit, and the builders' warm-up (tier_warm_up.py) builds exactly those texts:
    after each model's first tier the warm-up lacks as many units fewer as it built."""
    from delegate_runtime.gpu.opencl import build_workers, tier_warm_up
    from delegate_runtime.gpu.opencl.cache import KernelCache
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    device = select_device(opencl_device)
    info, spec = describe(device), build_workers.device_spec(device)

    def missing() -> dict[str, int]:
        jobs = tier_warm_up.jobs(info, KernelCache(tmp_path), spec)
        return {job["options"]: len(job["units"]) for job in jobs}

    everything = missing()
    fp32 = tier_warm_up.option_sets(info)[0]
    assert len(everything) == 3 and set(everything.values()) == {62}
    first = _session(separable_blocks(blocks=1)[0], tmp_path)
    assert missing()[fp32] == 62 - first.first_tier_units > 0
    other = _session(separable_blocks(blocks=1, tail="softmax")[0], tmp_path)
    new = set(_enqueued(other)) - set(_enqueued(first))
    assert new and missing()[fp32] == 62 - first.first_tier_units - len(new)
