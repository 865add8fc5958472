"""Persistent kernels' source (opencl/persistent.py) without a device: local arrays as
views of one buffer, the grid sizes tried, where the kernels are used. Their arithmetic
is tested on a device in tests/ops/test_gpu_persistent.py."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl import persistent


def test_local_arrays_become_aligned_views_and_a_local_scalar_a_macro():
    body = (
        "  __local float As[32][32 + 4] __attribute__((aligned(16)));\n"
        "  __local float4 parts[(16 / 4) * 2];\n"
        "  __local int last;\n"
        "  if (tid == 0) last = 1; x = As[1][2] + parts[0].x + last;\n"
    )
    out, nbytes = persistent._local_views(body)
    assert "__local float (*As)[36] = (__local float (*)[36])(lmem_ + 0);" in out
    # 32 x 36 floats = 4608 bytes, then 8 float4 = 128 bytes, then one int (32-byte slots)
    assert "__local float4* parts = (__local float4*)(lmem_ + 4608);" in out
    assert "__local int* pk_last_ = (__local int*)(lmem_ + 4736);\n#define last (*pk_last_)" in out
    assert out.rstrip().endswith("#undef last")
    assert nbytes == 4736 + 32


def test_a_local_array_of_an_unknown_type_is_refused():
    with pytest.raises(ValueError, match="local array of mystery_t"):
        persistent._local_views("__local mystery_t x[4];")


def test_grid_sizes_halve_down_to_one_group_per_compute_unit(monkeypatch):
    monkeypatch.setattr(persistent, "GROUPS_PER_CU", 4)
    assert persistent.grid_sizes(132) == [528, 264, 132]
    monkeypatch.setattr(persistent, "GROUPS", 1)
    assert persistent.grid_sizes(132) == [1]


@pytest.mark.parametrize(
    "env, platform, is_gpu, specialized, want",
    [
        ("", "NVIDIA CUDA", True, True, True),
        ("", "NVIDIA CUDA", True, False, False),  # the kernels take only the arena
        ("", "Portable Computing Language", False, True, False),
        ("", "AMD Accelerated Parallel Processing", True, True, False),  # no known progress
        ("1", "Portable Computing Language", False, True, True),
        ("0", "NVIDIA CUDA", True, True, False),
    ],
)
def test_where_persistent_kernels_are_used(monkeypatch, env, platform, is_gpu, specialized, want):
    monkeypatch.setenv(persistent.ENV, env)
    assert persistent.enabled(platform, is_gpu, specialized) is want
