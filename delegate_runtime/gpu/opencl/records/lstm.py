"""LSTM (the basic kernel, v2): concat [x, h], one GEMM, then the gates."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf, contiguous_strides, i4
from .gemm_kernel import GEMM
from .geometry import Shape, shape_of
from .lacks import (
    MEASURED_GENERIC,
    NO_EPILOGUE,
    NOT_MEASURED,
    NOT_PER_ELEMENT,
    NOT_SPECIALIZED,
)
from .record import GpuOp, OpRule, register


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    if op.options.get("kernel_type", 0) != 1 or len(op.inputs) != 5:
        return False, "Only the basic LSTM kernel is supported."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """h, c, the concatenation [x, h] and the gates' activations."""
    x, h, w, _, c = (shape_of(sg, t) for t in op.inputs[:5])
    units = h[-1] if h else 0
    if not x or x[:-1] != h[:-1] or c != h or w != (4 * units, x[-1] + units):
        raise ModelError(f"x {list(x)}, h {list(h)}, c {list(c)} and weights {list(w)} do not fit")
    return [h, c, (*x[:-1], x[-1] + units), (*x[:-1], 4 * units)]


def lower(lo, op: Operator) -> None:
    x, h, w_i, _, c = op.inputs[:5]
    h_out, c_out, concat, activ = op.outputs
    w = lo.const_float(w_i)  # [4 * units, in + units]
    units4, depth = w.shape
    batch = lo.t(x).size // lo.t(x).shape[-1]
    offset = 0
    for src in (x, h):
        cols = lo.t(src).shape[-1]
        shape = (1, 1, batch, cols)
        lo.emit_1d(
            op,
            "copy4d",
            [
                lo.operand(src),
                Buf(concat),
                i4(shape),
                i4(contiguous_strides(shape)),
                np.int32(0),
                i4((0, 0, depth, 1)),
                np.int32(offset),
            ],
            batch * cols,
        )
        offset += cols
    weights = lo.add_const(f"t{w_i}:kn", w.T)
    buffers = (Buf(concat), weights, lo.bias(op, 3, units4), Buf(activ))
    lo.gemm(op, buffers, (batch, units4, depth), 0)
    lo.emit_1d(
        op,
        "lstm_basic_gates",
        [
            Buf(activ),
            lo.operand(c),
            Buf(h_out),
            Buf(c_out),
            np.int32(batch),
            np.int32(units4 // 4),
        ],
        batch * (units4 // 4),
    )


register(
    GpuOp(
        "LSTM",
        OpRule((2,)),
        lower,
        ("lstm.cl", "movement.cl", "depthwise_at.cl", GEMM),
        check,
        shapes,
        launches=("copy4d", "gemm*", "lstm_basic_gates"),
        family="convolution",
        lacks={
            "specialized": f"lstm_basic_gates {NOT_MEASURED}; copy4d {MEASURED_GENERIC}",
            "persistent": NOT_SPECIALIZED,
            "epilogue": f"lstm_basic_gates {NO_EPILOGUE}",
            "step": NOT_PER_ELEMENT,
        },
    )
)
