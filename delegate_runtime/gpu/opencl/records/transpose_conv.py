"""TRANSPOSE_CONV: each output element gathers its contributions (weights OHWI)."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf, grid3, i4, shape4
from .geometry import Shape, const_ints, rank4, window_hw
from .lacks import NOT_MEASURED, NOT_PER_ELEMENT, NOT_SPECIALIZED
from .record import GpuOp, OpRule, register, versions


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    if not all(sg.tensors[t].is_constant for t in op.inputs[:2]):
        return False, "Output shape and weights must be constant."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """The output_shape constant, where it fits the filter and input as LiteRT requires."""
    out = tuple(const_ints(sg, op.inputs[0], "output_shape"))
    w, x = rank4(sg, op.inputs[1], "filter"), rank4(sg, op.inputs[2])
    if len(out) != 4 or out[0] != x[0] or out[3] != w[0] or w[3] != x[3] or min(out) < 0:
        raise ModelError(f"output_shape {list(out)} does not fit filter {list(w)}, input {list(x)}")
    if window_hw(op, out[1:3], w[1:3], dilated=False) != x[1:3]:
        raise ModelError(f"output_shape {list(out)} does not map back to input {list(x)}")
    return [out]


def lower(lo, op: Operator) -> None:
    w_i, x, out = op.inputs[1], op.inputs[2], op.outputs[0]
    w = lo.const_float(w_i)  # [OC, KH, KW, IC]
    oc, kh, kw, _ = w.shape
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    o = op.options
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    pt = pl = 0
    if o.get("padding", 0) == 0:  # SAME, computed from the output back to the input
        pt = max((in_s[1] - 1) * sh + kh - out_s[1], 0) // 2
        pl = max((in_s[2] - 1) * sw + kw - out_s[2], 0) // 2
    g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
    act = o.get("fused_activation_function", 0)
    lo.emit(
        op,
        "transpose_conv2d",
        [
            Buf(x),
            lo.add_const(f"t{w_i}", w),
            lo.bias(op, 3, oc),
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (kh, kw, sh, sw, pt, pl)),
            *lo.epilogue(act),
        ],
        g,
        lsz,
    )


register(
    GpuOp(
        "TRANSPOSE_CONV",
        OpRule(versions(1), versions(3)),
        lower,
        ("transpose_conv.cl",),
        check,
        shapes,
        epilogue=True,
        launches=("transpose_conv2d",),
        family="convolution",
        lacks={
            "specialized": f"transpose_conv2d {NOT_MEASURED}",
            "persistent": NOT_SPECIALIZED,
            "step": NOT_PER_ELEMENT,
        },
    )
)
