"""Launch order after fusion (opencl/schedule.py): a fused step whose operand comes later in
the model's order runs once that operand's kernels have run, against LiteRT's reference
kernels."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.gpu.opencl.schedule import Units, tensor_maps
from tests.conftest import require, require_module
from tests.ops.test_gpu_fusion import Built, _binary, _graph, _same_conv
from tests.ops.test_gpu_ops import PRECISIONS, TOL, opencl_device, randn

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32


def strided_block() -> Built:
    """MediaPipe's strided BlazeBlock, in the converter's order: depthwise stride 2 -> 1x1
    conv (8 -> 12) first, then the residual branch (MAX_POOL 2x2 -> PAD of channels 8 -> 12),
    then ADD + RELU. The ADD runs in the GEMM's epilogue, so the pool and the PAD launch
    before the GEMM."""
    b, g, (x,), ins = _graph((1, 6, 8, 8))
    d = g.tensor("d", (1, 3, 4, 8), F)
    g.op(
        "DEPTHWISE_CONV_2D",
        [x, g.const("dw", randn("sdw", 1, 3, 3, 8)), g.const("db", randn("sdb", 8))],
        [d],
        padding="SAME",
        stride_h=2,
        stride_w=2,
        depth_multiplier=1,
        fused_activation_function="NONE",
    )
    p = g.tensor("p", (1, 3, 4, 12), F)
    _same_conv(
        g,
        [d, g.const("pw", randn("spw", 12, 1, 1, 8, scale=0.35)), g.const("pb", randn("spb", 12))],
        p,
        "NONE",
    )
    m = g.tensor("m", (1, 3, 4, 8), F)
    g.op(
        "MAX_POOL_2D",
        [x],
        [m],
        padding="VALID",
        stride_h=2,
        stride_w=2,
        filter_height=2,
        filter_width=2,
        fused_activation_function="NONE",
    )
    r = g.tensor("r", (1, 3, 4, 12), F)
    pads = np.array([[0, 0], [0, 0], [0, 0], [0, 4]], np.int32)
    g.op("PAD", [m, g.const("pads", pads)], [r])
    g.output(_binary(g, "ADD", p, r, (1, 3, 4, 12), "y", "RELU"))
    return Built(b.build(), ins, (1, 0, 4))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_later_operand_runs_before_the_kernel_reading_it(opencl_device, precision):
    from delegate_runtime.gpu.delegate import GpuSession

    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    built = strided_block()
    session = GpuSession(read_model(built.model), precision=precision, log=io.StringIO())
    assert session.fused_kernels().get(1) == built.fused, session.fused_kernels()
    executor = session.executors[0]
    order = [c[0] for c in executor.covers if c]
    assert order == [2, 3, 1], order  # pool, PAD, then the GEMM with the ADD
    want = litert.run(built.model, built.inputs, reference=True)
    for g_, w in zip(session.invoke(built.inputs), want, strict=True):
        scale = max(float(np.abs(w).max()), 1.0)
        np.testing.assert_allclose(g_, w, rtol=TOL[precision], atol=TOL[precision] * scale)


def test_a_kernel_never_reads_what_depends_on_its_own_output():
    """Units refuses an operand computed from the reading unit's own output (a cycle)."""
    model = read_model(strided_block().model)
    sg = model.subgraphs[0]
    produced_by, readers = tensor_maps(sg)
    units = Units(sg, list(range(len(sg.operators))), readers)
    assert units.can_read(1, 3)  # the PAD does not depend on the 1x1 conv
    assert not units.can_read(0, 1)  # the 1x1 conv reads the depthwise output
    assert not units.can_read(1, 4)  # the ADD reads the 1x1 conv's output
    units.merge(1, 0)
    assert units.order(produced_by) == [1, 2, 3, 4]
