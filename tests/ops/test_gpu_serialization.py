"""Delegate serialization on a real device: entries written, reused, and rebuilt when bad."""

from __future__ import annotations

import io
import stat

import numpy as np
import pytest

from delegate_runtime.interpreter import Interpreter
from tests.conftest import require_module
from tests.ops.test_gpu_ops import conv, opencl_device

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests


@pytest.fixture(scope="module")
def model_and_input():
    model, xs = conv(k=(1, 1), cin=8, cout=4).model(0)
    return model, xs


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory, opencl_device):
    return tmp_path_factory.mktemp("serialized") / "private" / "kernels"


def session(model, cache_dir, **kw):
    from delegate_runtime.gpu.delegate import GpuSession

    return GpuSession(model, log=io.StringIO(), serialization_dir=str(cache_dir), **kw)


def entries(cache_dir):
    return sorted(p for p in cache_dir.iterdir() if p.suffix == ".bin")


def test_cold_then_warm(model_and_input, cache_dir):
    model, xs = model_and_input
    cold = session(model, cache_dir)
    assert not cold.program_from_cache
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    (entry,) = entries(cache_dir)
    assert entry.name.startswith(model.sha256[:64] + "_")  # default token: the model's hash
    warm = session(model, cache_dir)
    assert warm.program_from_cache
    want = Interpreter(model).invoke(xs)[0]
    np.testing.assert_allclose(warm.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)


def test_corrupt_entry_is_rebuilt(model_and_input, cache_dir):
    model, xs = model_and_input
    session(model, cache_dir)
    (entry,) = entries(cache_dir)
    raw = bytearray(entry.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    entry.write_bytes(bytes(raw))
    rebuilt = session(model, cache_dir)
    assert not rebuilt.program_from_cache
    assert session(model, cache_dir).program_from_cache  # written again, whole
    want = Interpreter(model).invoke(xs)[0]
    np.testing.assert_allclose(rebuilt.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)


def test_token_names_the_entry_and_precision_keys_it(model_and_input, cache_dir):
    model, _ = model_and_input
    session(model, cache_dir, model_token="my-model-v1")
    session(model, cache_dir, model_token="my-model-v1", precision="fp16")
    mine = [p for p in entries(cache_dir) if p.name.startswith("my-model-v1_")]
    assert len(mine) == 2  # fp32 and fp16 build options differ


def test_another_model_does_not_use_this_entry(cache_dir):
    other, _ = conv(k=(1, 1), cin=8, cout=5).model(0)
    assert not session(other, cache_dir).program_from_cache


def test_a_specialized_program_is_cached_as_the_model_s_own(
    model_and_input, tmp_path, monkeypatch, opencl_device
):
    """With kernels specialized (GPUs' default), the cache holds the model's own program,
    which a second session loads and runs."""

    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    model, xs = model_and_input
    cold = session(model, tmp_path)
    assert cold.specialized_kernels >= 1 and not cold.program_from_cache
    assert len(entries(tmp_path)) == cold.program_units  # an entry per unit
    assert all(e.name.startswith(model.sha256[:64] + "_") for e in entries(tmp_path))
    warm = session(model, tmp_path)
    assert warm.program_from_cache and warm.specialized_kernels == cold.specialized_kernels
    want = Interpreter(model).invoke(xs)[0]
    np.testing.assert_allclose(warm.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)


def test_units_built_by_worker_processes_are_loaded_and_count_as_built(
    model_and_input, tmp_path, monkeypatch, opencl_device
):
    """Where the driver compiles one program at a time per process (NVIDIA; here PoCL
    taken for one), worker processes and the session build the units the cache lacks, and
    the session loads them: a cold session still says built, not from cache; a warm one
    starts none."""
    from delegate_runtime.gpu.opencl import build_workers
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    platform = describe(select_device(opencl_device)).platform
    monkeypatch.setattr(build_workers, "ONE_BUILD_PER_PROCESS", (platform,))
    ran = []
    build = build_workers.build_in_workers
    monkeypatch.setattr(
        build_workers, "build_in_workers", lambda *a: ran.append(build(*a)) or ran[-1]
    )
    from delegate_runtime import read_model
    from tests.ops.test_gpu_persistent import separable_blocks

    raw, xs = separable_blocks(blocks=1)
    model = read_model(raw)
    cold = session(model, tmp_path, build_jobs=2)
    assert cold.program_units == 2 and ran == [(2, 1, 0)]
    assert not cold.program_from_cache
    assert cold.program_summary == "2 units, 2 built (1 process + session)"
    warm = session(model, tmp_path, build_jobs=2)
    assert ran[-1] == (0, 0, 0) and warm.program_summary == "2 units from cache"
    want = Interpreter(model).invoke(xs)[0]
    np.testing.assert_allclose(cold.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)


def test_the_session_builds_every_unit_its_workers_could_not(
    model_and_input, tmp_path, monkeypatch, opencl_device
):
    """Workers that die at start (here: no Python at all) leave their claims untaken: the
    session, a builder itself, builds every unit, largest first, and runs the model."""
    from delegate_runtime.gpu.opencl import build_workers
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    platform = describe(select_device(opencl_device)).platform
    monkeypatch.setattr(build_workers, "ONE_BUILD_PER_PROCESS", (platform,))
    monkeypatch.setattr(build_workers.sys, "executable", "/bin/false")
    from delegate_runtime import read_model
    from tests.ops.test_gpu_persistent import separable_blocks

    raw, xs = separable_blocks(blocks=1)
    model = read_model(raw)
    cold = session(model, tmp_path, build_jobs=3)
    assert cold.program_units == 3 and not cold.program_from_cache
    assert cold.program_summary == "3 units, 3 built (2 processes + session)"
    want = Interpreter(model).invoke(xs)[0]
    np.testing.assert_allclose(cold.invoke(xs)[0], want, rtol=1e-4, atol=1e-4)


def test_each_unit_is_claimed_by_one_builder(tmp_path):
    from delegate_runtime.gpu.opencl.unit_claims import claim

    job = tmp_path / "job.json"
    (tmp_path / "claims").mkdir()
    assert claim(job, 0) and claim(job, 1)
    assert not claim(job, 0) and not claim(job, 1)


def test_a_session_that_built_prunes_the_cache_to_its_bound(model_and_input, tmp_path, monkeypatch):
    """A session that built its program prunes the kernel cache in a thread to
    $DEVICEFARM_KERNEL_CACHE_BYTES, the entries used least recently going first: an old
    entry goes, a newer one and the session's own stay, and the next session is warm."""
    import os
    import threading
    import time

    from delegate_runtime.gpu.opencl.cache import CacheKey, KernelCache

    model, _ = model_and_input
    cache_dir = tmp_path / "kernels"
    cache = KernelCache(cache_dir)
    old = [CacheKey("other-model", "dev", "drv", "", f"{n:064x}") for n in range(2)]
    for age, key in enumerate(old):  # 1.4 MB of another model's units, a second apart
        cache.store(key, bytes(700_000))
        os.utime(cache.path(key), (1_000_000 + age, 1_000_000 + age))
    monkeypatch.setenv("DEVICEFARM_KERNEL_CACHE_BYTES", str(1 << 20))
    assert not session(model, cache_dir).program_from_cache
    deadline = time.monotonic() + 30
    while any(t.name.startswith("kernel-cache-prune") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the prune did not end"
        time.sleep(0.05)
    assert [cache.holds(k) for k in old] == [False, True]
    assert session(model, cache_dir).program_from_cache
