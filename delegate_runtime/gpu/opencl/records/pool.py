"""AVERAGE_POOL_2D and MAX_POOL_2D: one kernel, the kind a POOL_* code; an average over
the whole map (one window covering the input) runs as the MEAN reduction."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.common import PADDING_SAME, padding_amounts
from ....validate import pool_padding_problem
from ..codes import Pool
from ..launch import Buf, grid3, i4, shape4
from .geometry import Shape, rank4, window_hw
from .mean import reduce_mean
from .record import GpuOp, OpRule, register, versions


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x, o = rank4(sg, op.inputs[0]), op.options
    k = (o.get("filter_height", 1), o.get("filter_width", 1))
    if min(k) <= 0:
        raise ModelError(f"filter size {list(k)} must be positive")
    if o.get("padding", 0) == PADDING_SAME and (problem := pool_padding_problem(o, x[1:3])):
        raise ModelError(problem)
    return [(x[0], *window_hw(op, x[1:3], k, dilated=False), x[3])]


def _whole_map(in_s: Shape, out_s: Shape, k: tuple[int, int], pad: tuple[int, int]) -> bool:
    """Whether the output is one pixel whose window, from -pad, covers every input pixel: its
    average (LiteRT divides by the pixels inside the window) is the mean over H and W."""
    return out_s[1:3] == (1, 1) and all(
        k[i] - pad[i] >= in_s[1 + i] and pad[i] >= 0 for i in range(2)
    )


def averages_whole_map(op: Operator, sg: Subgraph) -> bool:
    """An AVERAGE_POOL_2D that is a mean over H and W (`_whole_map`)."""
    if op.op != "AVERAGE_POOL_2D" or len(sg.tensors[op.inputs[0]].shape) != 4:
        return False
    in_s, out_s = sg.tensors[op.inputs[0]].shape, sg.tensors[op.outputs[0]].shape
    o = op.options
    kh, kw = o.get("filter_height", 1), o.get("filter_width", 1)
    pt, _ = padding_amounts(in_s[1], kh, o.get("stride_h", 1), 1, o.get("padding", 0))
    pl, _ = padding_amounts(in_s[2], kw, o.get("stride_w", 1), 1, o.get("padding", 0))
    return _whole_map(in_s, out_s, (kh, kw), (pt, pl))


def _lower(lo, op: Operator, kind: Pool) -> None:
    x, out = op.inputs[0], op.outputs[0]
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    o = op.options
    kh, kw = o.get("filter_height", 1), o.get("filter_width", 1)
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    pt, _ = padding_amounts(in_s[1], kh, sh, 1, o.get("padding", 0))
    pl, _ = padding_amounts(in_s[2], kw, sw, 1, o.get("padding", 0))
    act = o.get("fused_activation_function", 0)
    if kind == Pool.AVERAGE and _whole_map(in_s, out_s, (kh, kw), (pt, pl)):
        # NOTE: one work item per window summed 128x128 pixels in 3.2 ms on an H200; the
        # reduction shares each channel among work groups (6-12 us).
        reduce_mean(lo, op, (in_s[0], in_s[1] * in_s[2], in_s[3]), lo.epilogue(act))
        return
    g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "pool2d",
        [
            Buf(x),
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (kh, kw, sh, sw, pt, pl, kind)),
            lo.oview(Buf(out), out_s[3]),
            *lo.epilogue(act),
        ],
        g,
        lsz,
    )


register(
    GpuOp(
        "AVERAGE_POOL_2D",
        OpRule(versions(1), versions(2)),
        lambda lo, op: _lower(lo, op, Pool.AVERAGE),
        ("pool.cl",),
        shapes=shapes,
        epilogue=True,
        launches=("pool2d",),
        family="pool",
    ),
    GpuOp(
        "MAX_POOL_2D",
        OpRule(versions(1), versions(2)),
        lambda lo, op: _lower(lo, op, Pool.MAX),
        ("pool.cl",),
        shapes=shapes,
        epilogue=True,
        launches=("pool2d",),
        family="pool",
    ),
)
