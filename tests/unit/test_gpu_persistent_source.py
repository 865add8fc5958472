"""Persistent kernels' source (opencl/persistent.py) without a device: local arrays as
views of one buffer, the grid sizes tried, where the kernels are used. Their arithmetic
is tested on a device in tests/ops/test_gpu_persistent.py."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl import persistent
from delegate_runtime.gpu.switches import DEFAULTS, Switches


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


def test_grid_sizes_halve_down_to_one_group_per_compute_unit():
    four = DEFAULTS.replace(persistent_groups_per_cu=4)
    assert persistent.grid_sizes(132, four) == [528, 264, 132]
    assert persistent.grid_sizes(132, four.replace(persistent_groups=1)) == [1]


def test_the_barrier_count_has_its_cache_line_to_itself():
    """Groups poll the count while others arrive on it: no other word of the state shares
    its 128-byte line (loads of the failure word and the spin limit there slowed a barrier
    of 528 groups from 2.4 to 3.7 us on an H200: bench/barrier_probe.py)."""
    line = 32  # ints
    assert persistent.COUNT % line == 0
    others = [persistent.OUT, persistent.FAILED, persistent.LIMIT]
    assert all(w // line != persistent.COUNT // line for w in others)
    assert (persistent.COUNT // line + 1) * line <= persistent.HEADER  # offsets start after it


def test_a_barrier_reads_the_spin_limit_once_and_the_failure_word_now_and_then():
    sync = persistent.prelude(True).split("inline void pk_grid_sync")[1].split("pk_leave")[0]
    loop = sync.split("for (")[1]
    assert "state[PK_LIMIT]" not in loop  # read into a register before the spin
    assert "!(spins & 1023) && (state[PK_FAILED]" in loop


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
def test_where_persistent_kernels_are_used(env, platform, is_gpu, specialized, want):
    switches = Switches.from_env({"DEVICEFARM_GPU_PERSISTENT": env})
    assert persistent.enabled(platform, is_gpu, specialized, switches) is want


def test_a_persistent_switch_set_off_by_a_caller_holds_on_nvidia_too():
    off = DEFAULTS.replace(persistent=False)
    assert not persistent.enabled("NVIDIA CUDA", True, True, off)


def _layers() -> list:
    """Two layer functions as plan_runs makes them (only what _kernel reads matters)."""
    return [
        persistent._Layer("", "pk_0_x", groups=8, items=256, local_bytes=64, vectors=1),
        persistent._Layer("", "pk_1_x", groups=3, items=64, local_bytes=0, vectors=2),
    ]


def _calls(edges: tuple = ((), ())) -> list:
    return list(zip(_layers(), edges, strict=True))


def test_layers_meet_at_a_barrier_between_them_and_stamps_come_off_by_default():
    text = persistent._kernel("persistent0_x", _calls(), ())
    assert text.count("pk_grid_sync(state, 1);") == 1
    assert "pk_grid_sync(state, 2);" not in text  # nothing after the last layer waits
    assert "PK_STAMP" not in text and "stamps_" not in text


def test_the_barrier_arrival_is_ptx_on_nvidia_only():
    """NVIDIA's programs arrive at their barriers with a release reduction and poll with
    acquire loads (inline PTX, chosen by PK_PTX_FENCE); a CPU device's program has no PTX
    at all."""
    nvidia = persistent.prelude(ptx_fence=True)
    assert "#define PK_PTX_FENCE 1" in nvidia
    assert "red.release.gpu.global.add.s32" in nvidia and "ld.acquire.gpu" in nvidia
    assert "#define PK_PTX_FENCE" not in persistent.prelude(ptx_fence=False)


def test_staging_buffers_are_the_kernels_parameters_after_its_state():
    """A layer taking a partition's edge (a staging buffer) is passed the kernel's own
    parameter for it, cast to the layer's parameter type, one parameter per tensor."""
    calls = _calls((((7, "__global const float*"),), ((9, "__global float*"),)))
    text = persistent._kernel("persistent0_x", calls, (7, 9))
    head = "volatile __global int* state, __global uchar* edge0_, __global uchar* edge1_)"
    assert head in text
    assert "vload16(0, offs), (__global const float*)edge0_, (__local uchar*)lmem_" in text
    assert "(__global float*)edge1_, (__local uchar*)lmem_" in text


@pytest.mark.parametrize(
    "costs, limit, spans",
    [
        ([10, 10, 10], 100, [(0, 3)]),  # within the bound: one run
        ([10, 10, 10], None, [(0, 3)]),  # no bound
        ([40, 40, 40, 40], 100, [(0, 2), (2, 4)]),
        ([60, 60, 60, 60, 60], 100, [(0, 2), (2, 5)]),  # none under the least layers: a tail joins
        ([500, 10, 10], 100, [(0, 3)]),  # one layer past the bound still needs a partner
        ([30, 30, 30, 30, 30, 30, 30], 100, [(0, 3), (3, 7)]),
    ],
)
def test_a_long_run_splits_where_its_layer_functions_pass_the_bound(costs, limit, spans):
    assert persistent.split_run(costs, limit) == spans
