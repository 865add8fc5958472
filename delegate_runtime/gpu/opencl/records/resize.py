"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, TFLite's coordinate rules."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf, grid3, i4, shape4
from .geometry import Shape, const_ints, rank4
from .record import GpuOp, OpRule, register, versions


def _shapes(op: Operator, sg: Subgraph, smallest: int) -> list[Shape]:
    x, size = rank4(sg, op.inputs[0]), const_ints(sg, op.inputs[1], "size")
    if len(size) != 2 or min(size) < smallest:
        raise ModelError(f"size must be two values >= {smallest}, got {size}")
    return [(x[0], *size, x[3])]


def _lower(lo, op: Operator, kernel: str) -> None:
    x, out = op.inputs[0], op.outputs[0]
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    align = bool(op.options.get("align_corners", False))
    half = bool(op.options.get("half_pixel_centers", False))

    def scale(i: int, o: int) -> float:
        return (i - 1) / (o - 1) if align and o > 1 else i / o

    g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        kernel,
        [
            Buf(x),
            Buf(out),
            i4(in_s),
            i4(out_s),
            np.float32(scale(in_s[1], out_s[1])),
            np.float32(scale(in_s[2], out_s[2])),
            np.int32(int(align) | (int(half) << 1)),
        ],
        g,
        lsz,
    )


V3 = OpRule(versions(3), versions(3))
register(
    GpuOp(
        "RESIZE_BILINEAR",
        V3,
        lambda lo, op: _lower(lo, op, "resize_bilinear"),
        ("resize.cl",),
        shapes=lambda op, sg: _shapes(op, sg, 1),
        launches=("resize_bilinear",),
        family="movement",
    ),
    GpuOp(
        "RESIZE_NEAREST_NEIGHBOR",
        V3,
        lambda lo, op: _lower(lo, op, "resize_nearest"),
        ("resize.cl",),
        shapes=lambda op, sg: _shapes(op, sg, 0),
        launches=("resize_nearest",),
        family="movement",
    ),
)
