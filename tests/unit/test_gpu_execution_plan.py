"""A GPU session's execution plan (delegate_runtime/gpu/execution_plan.py): every path
decided once from the options, the switches and the device."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.cpu_runs import LITERT, REFERENCE
from delegate_runtime.gpu.execution_plan import plan_execution
from delegate_runtime.gpu.opencl.runtime import DeviceInfo
from delegate_runtime.gpu.switches import DEFAULTS, Switches


def device(platform: str = "NVIDIA CUDA", is_gpu: bool = True) -> DeviceInfo:
    return DeviceInfo("k", platform, "d", "v", "1", "OpenCL 3.0", 132, 1 << 30, True, is_gpu)


def plan(profiling: bool = False, on: DeviceInfo | None = None, switches=DEFAULTS, **kw):
    kw.setdefault("specialize_option", None)
    return plan_execution(
        switches, profiling=profiling, cpu_runtime=LITERT, device=on or device(), **kw
    )


def test_the_shipped_path_on_nvidia():
    got = plan()
    assert (got.hot_path, got.native_library, got.host_edges, got.pinned) == (True,) * 4
    assert (got.specialize, got.persistent) == (True, True)
    assert got.gemm_groups_per_cu == DEFAULTS.persistent_groups_per_cu
    assert got.cpu_runtime == LITERT and not got.profiling


def test_op_profiling_launches_one_by_one_and_lowers_as_the_shipped_path():
    """An event per launch: no persistent kernels, no hot path (so no C library, host
    edges or pinned copies), the CPU nodes on the reference; its GEMMs aim for the grid
    the shipped path's persistent kernels have, so the profile times the same kernels."""
    got = plan(profiling=True)
    assert got.profiling and got.specialize
    assert (got.persistent, got.hot_path, got.native_library, got.host_edges, got.pinned) == (
        (False,) * 5
    )
    assert got.gemm_groups_per_cu == plan().gemm_groups_per_cu
    assert got.cpu_runtime == REFERENCE


@pytest.mark.parametrize(
    ("platform", "is_gpu", "specialize", "persistent"),
    [
        ("NVIDIA CUDA", True, True, True),
        ("AMD", True, True, False),
        ("Portable", False, False, False),
    ],
)
def test_the_device_decides_at_the_defaults(platform, is_gpu, specialize, persistent):
    got = plan(on=device(platform, is_gpu))
    assert (got.specialize, got.persistent, got.pinned) == (specialize, persistent, is_gpu)
    assert got.gemm_groups_per_cu == (DEFAULTS.persistent_groups_per_cu if persistent else None)


def test_switches_and_options_decide_where_set():
    off = DEFAULTS.replace(persistent=False, host_edges=False, native_loop=False)
    got = plan(switches=off)
    assert (got.persistent, got.gemm_groups_per_cu) == (False, None)
    assert (got.host_edges, got.native_library, got.hot_path) == (False, False, True)
    assert not plan(specialize_option=False).persistent  # persistent kernels need the copies
    on = Switches.from_env({"DEVICEFARM_GPU_PERSISTENT": "1"})  # set: on every device
    forced = plan(on=device("Portable", False), switches=on, specialize_option=True)
    assert forced.persistent


def test_without_a_device_nothing_is_compiled_for_one():
    got = plan_execution(DEFAULTS, profiling=False, cpu_runtime=LITERT, specialize_option=None)
    assert (got.specialize, got.persistent, got.gemm_groups_per_cu) == (False, False, None)
