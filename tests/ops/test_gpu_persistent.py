"""Persistent kernels (opencl/persistent.py): a run of specialized launches as one kernel
with grid barriers between its layers, on a real OpenCL device (PoCL in CI, with no more
groups than compute units), against LiteRT's reference kernels and against the same
launches run one by one, to the bit."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import _same_conv, _same_depthwise, check_against_litert
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn
from tests.switched import switched

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32
SHAPE = (1, 10, 12, 32)  #: the blocks' input (NHWC)


def separable_blocks(
    blocks: int = 2, log_softmax: bool = False, tail: str = "", shape: tuple = SHAPE
) -> tuple[bytes, list[np.ndarray]]:
    """A 1x1 convolution, then `blocks` of 3x3 depthwise + RELU6 and 1x1 convolution +
    RELU6 (MobileNet's separable blocks), then a 1x1 convolution with K long enough to
    split: GEMM and depthwise launches in one run. With `log_softmax`, a LOG_SOFTMAX (no GPU
    kernel) and the same again after it: two GPU partitions. `tail` adds a classifier's
    op after the last convolution: "mean", MEAN over the map; "softmax", SOFTMAX over
    the channels."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    n, h, w, c = shape

    def conv(x, cin, cout, name, act="RELU6"):
        wt = g.const(name + "w", randn(name + "w", cout, 1, 1, cin, scale=1 / np.sqrt(cin)))
        bias = g.const(name + "b", randn(name + "b", cout, scale=0.1))
        y = g.tensor(name + "y", (n, h, w, cout), F)
        _same_conv(g, [x, wt, bias], y, act)
        return y

    def depthwise(x, ch, name):
        wt = g.const(name + "w", randn(name + "w", 1, 3, 3, ch, scale=1 / 3))
        bias = g.const(name + "b", randn(name + "b", ch, scale=0.1))
        y = g.tensor(name + "y", (n, h, w, ch), F)
        _same_depthwise(g, [x, wt, bias], y, "RELU6")
        return y

    def part(t, cin, tag):
        t = conv(t, cin, 64, tag + "in")
        for i in range(blocks):
            t = conv(depthwise(t, 64, f"{tag}d{i}"), 64, 64, f"{tag}p{i}")
        return t

    t = part(x, c, "")
    if log_softmax:
        summed = g.tensor("summed", (n, h, w, 64), F)
        g.op("LOG_SOFTMAX", [t], [summed])
        t = part(summed, 64, "b")
    t = conv(t, 64, 512, "out", act="NONE")
    if tail == "mean":
        pooled = g.tensor("pooled", (n, 512), F)
        g.op("MEAN", [t, g.const("axes", np.array([1, 2], np.int32))], [pooled])
        t = pooled
    elif tail == "softmax":
        probs = g.tensor("probs", (n, h, w, 512), F)
        g.op("SOFTMAX", [t], [probs], beta=1.0)
        t = probs
    g.output(t)
    x0 = np.random.default_rng(3).uniform(-1, 1, shape).astype(F)
    return b.build(), [x0]


def _session(model: bytes, precision: str, persistent: str, monkeypatch):
    from delegate_runtime.gpu.delegate import GpuSession

    _one_group_per_unit(monkeypatch)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", persistent)
    return GpuSession(read_model(model), precision=precision, log=io.StringIO())


def _one_group_per_unit(monkeypatch) -> None:
    """One group on a CPU device (PoCL may hand two groups to one thread, which then
    never meet at a barrier); one per compute unit on a GPU, which holds them all."""
    from delegate_runtime.gpu.opencl.runtime import describe, select_device

    if describe(select_device(None)).is_gpu:
        # the launches one by one plan their GEMMs as the persistent kernel's do
        switched(monkeypatch, persistent_groups_per_cu=1, gemm_groups_per_cu=1)
    else:
        switched(monkeypatch, persistent_groups=1, gemm_groups_per_cu=2)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_run_of_layers_is_one_kernel_and_computes_what_its_launches_compute(
    opencl_device, precision, monkeypatch
):
    """The launches run as one persistent kernel: outputs within LiteRT's reference
    kernels' tolerance, equal to the bit to the launches run one by one, invoke after
    invoke (the barrier counts start at zero each time)."""
    _check_one_kernel(separable_blocks(), precision, monkeypatch)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("tail", ["mean", "softmax"])
def test_a_classifier_tail_joins_the_run(opencl_device, tail, precision, monkeypatch):
    """MEAN, and SOFTMAX, after the convolutions are layers of the same persistent
    kernel (their copies take only the arena, the output's staging buffer besides where
    the edge is float32), computing what their launches compute. (A whole classifier
    tail in one kernel, MEAN, FULLY_CONNECTED and SOFTMAX, took PoCL's compiler past 15
    minutes on two cores; on the H200 MobileNet v1 runs as one kernel of 31 layers:
    docs/notebook/20-2026-11-28-inputs-and-outputs-in-host-memory-the-classifier.md.)"""
    case = separable_blocks(blocks=0, tail=tail, shape=(1, 4, 4, 32))
    _check_one_kernel(case, precision, monkeypatch)


def _check_one_kernel(case: tuple[bytes, list[np.ndarray]], precision: str, monkeypatch):
    model, inputs = case
    one_by_one = _session(model, precision, "0", monkeypatch)
    launches = len(one_by_one.executors[0].kernels)
    want = one_by_one.invoke(inputs)
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "1")
    session = check_against_litert(model, inputs, precision, runs=3)
    ex = session.executors[0]
    # edge conversions (fp16, or host edges: opencl/host_edges.py) are layers too
    edged = precision == "fp16" or session.host_edges
    assert any(name.startswith("to_storage") for name in ex.kernel_names) == edged
    assert launches >= 3
    assert [(run.start, run.end) for run, _ in ex.persistent] == [(0, launches)]
    assert [kernel.function_name for kernel, _, _ in ex.enqueued] == ["persistent0_0"]
    assert ex.kernel_names == one_by_one.executors[0].kernel_names  # the launches it runs
    assert session.persistent_runs == (launches, 1)
    for got, w in zip(session.invoke(inputs), want, strict=True):
        np.testing.assert_array_equal(got, w)


def test_a_run_past_the_size_bound_is_split_into_kernels_in_a_row(opencl_device, monkeypatch):
    """A run whose layer functions pass persistent_max_run_bytes is split into persistent
    kernels of at least persistent_min_layers layers, one after another with no launch
    between them (each its own program unit, built in parallel), computing what the
    launches compute."""
    model, inputs = separable_blocks()
    one_by_one = _session(model, "fp32", "0", monkeypatch)
    launches = len(one_by_one.executors[0].kernels)
    want = one_by_one.invoke(inputs)
    switched(monkeypatch, persistent_max_run_bytes=1)  # every run as short as allowed
    session = _session(model, "fp32", "1", monkeypatch)
    runs = [(run.start, run.end) for run, _ in session.executors[0].persistent]
    spans = [(i, i + 2) for i in range(0, launches - launches % 2 - 2, 2)]
    assert runs == spans + [(spans[-1][1], launches)]
    assert session.persistent_runs == (launches, len(runs))
    for got, w in zip(session.invoke(inputs), want, strict=True):
        np.testing.assert_array_equal(got, w)


def test_groups_the_device_cannot_hold_at_once_fall_back_to_launches(opencl_device, monkeypatch):
    """More groups than the device runs at once: the session's first run of the kernel
    finds a grid barrier that never filled, keeps the launches, and computes what they
    compute (the tiles' counters, disturbed by the failed run, start again at zero)."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl.runtime import select_device

    model, inputs = separable_blocks()
    want = _session(model, "fp32", "0", monkeypatch).invoke(inputs)
    groups = 64 * select_device(None).max_compute_units
    switched(monkeypatch, persistent_groups=groups, persistent_check_spins=1 << 16)
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "1")
    session = GpuSession(read_model(model), precision="fp32", log=io.StringIO())
    ex = session.executors[0]
    assert ex.persistent == [] and ex.enqueued == ex.kernels
    assert session.persistent_runs == (0, 0)
    for got, w in zip(session.invoke(inputs), want, strict=True):
        np.testing.assert_array_equal(got, w)


def test_a_warm_session_tries_the_grid_that_held_first(opencl_device, monkeypatch, tmp_path):
    """A grid the device cannot hold fails its trial once per kernel and device: the
    session keeps the grid that held beside the kernel's cache entry, and the next session
    of the model tries that one alone (a failed trial spins to its limit: 52 ms of an
    H100's warm start), computing what the launches compute."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import executor, grid_record, persistent
    from delegate_runtime.gpu.opencl.runtime import select_device

    model, inputs = separable_blocks()
    want = _session(model, "fp32", "0", monkeypatch).invoke(inputs)
    too_many = 64 * select_device(None).max_compute_units
    monkeypatch.setattr(persistent, "grid_sizes", lambda units, switches: [too_many, 1])
    switched(monkeypatch, persistent_check_spins=1 << 16)
    tried: list[int] = []
    enqueue_once = executor.enqueue_once

    def counted(queue, kernel, gsize, lsize):
        tried.append(gsize[0] // lsize[0])
        enqueue_once(queue, kernel, gsize, lsize)

    monkeypatch.setattr(executor, "enqueue_once", counted)
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "1")
    for want_tried, want_failed in (([too_many, 1], 1), ([1], 0)):
        tried.clear()
        session = GpuSession(read_model(model), log=io.StringIO(), serialization_dir=str(tmp_path))
        ex = session.executors[0]
        assert (tried, ex.failed_trials) == (want_tried, want_failed)
        assert session.persistent_runs[1] == 1
        ((run, _),) = ex.persistent
        for got, w in zip(session.invoke(inputs), want, strict=True):
            np.testing.assert_array_equal(got, w)
    assert session.program_summary.endswith("from cache")
    records = list(tmp_path.rglob("*.grids"))
    assert len(records) == 1
    assert grid_record.held(str(records[0])[: -len(".grids")], run.kernel) == 1


def test_two_partitions_each_with_a_run_share_one_program(opencl_device, monkeypatch):
    """A LOG_SOFTMAX between two runs: two GPU partitions, a persistent kernel each in one
    program (what the kernels share is defined once), the outputs those of the launches."""
    from delegate_runtime.gpu.delegate import GpuSession

    model, inputs = separable_blocks(blocks=1, log_softmax=True)
    _one_group_per_unit(monkeypatch)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    outs = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", flag)
        session = GpuSession(read_model(model), max_delegated_partitions=2, log=io.StringIO())
        assert len(session.executors) == 2
        outs[flag] = session.invoke(inputs)
    assert session.persistent_runs[1] == 2
    assert [run.kernel for ex in session.executors for run, _ in ex.persistent] == [
        "persistent0_0",
        "persistent1_0",
    ]
    for got, want in zip(outs["1"], outs["0"], strict=True):
        np.testing.assert_array_equal(got, want)


def test_gemms_plan_for_the_persistent_grid_where_one_runs(opencl_device, monkeypatch):
    """A session that runs persistent kernels lowers its GEMMs for their grid
    (persistent_groups_per_cu groups a compute unit); one that does not, for launches of
    their own (gemm_groups_per_cu). Stopped once lowered: no program is built."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import lowering, preparation
    from delegate_runtime.gpu.switches import DEFAULTS

    class Lowered(Exception):
        pass

    planned = []
    lowerer_init = lowering.Lowerer.__init__

    def init(self, sg, compute_units, precision="fp32", gemm_groups_per_cu=None, switches=None):
        planned.append(gemm_groups_per_cu)
        lowerer_init(self, sg, compute_units, precision, gemm_groups_per_cu, switches)

    def stop(*args):
        raise Lowered

    monkeypatch.setattr(lowering.Lowerer, "__init__", init)
    monkeypatch.setattr(preparation, "model_program", stop)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    model, _ = separable_blocks(blocks=1)
    for flag, want in (("1", DEFAULTS.persistent_groups_per_cu), ("0", None)):
        monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", flag)
        with pytest.raises(Lowered):
            GpuSession(read_model(model), log=io.StringIO())
        assert planned[-1] == want


def test_a_profiling_session_neither_plans_nor_compiles_persistent_kernels(
    opencl_device, monkeypatch
):
    """Op profiling launches kernels one by one (an event each): where the shipped path
    runs persistent kernels, a profiling session builds none (its plan: execution_plan.py,
    tests/unit/test_gpu_execution_plan.py). Stopped at the build: no program is compiled."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import preparation

    class Built(Exception):
        pass

    def build_program(opened, program, *rest):
        raise Built(program.units)

    monkeypatch.setattr(preparation, "build_program", build_program)
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", "1")
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "1")
    model, _ = separable_blocks(blocks=1)
    built = {}
    for profiling in (False, True):
        with pytest.raises(Built) as stopped:
            GpuSession(read_model(model), profiling=profiling, log=io.StringIO())
        built[profiling] = stopped.value.args[0]
    assert any("persistent0_0" in unit for unit in built[False])
    assert not any("persistent0_" in unit for unit in built[True])
