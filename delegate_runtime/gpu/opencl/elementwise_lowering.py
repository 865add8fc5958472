"""Elementwise launches shared by the ops' lowerings: an activation of its own, the
quantize-and-dequantize snap after a quantized tensor, `unary` and the broadcasting
`binary4d` (its operands' strides, its epilogue). The Lowerer offers each to the records
(lowering_api.Lowering)."""

from __future__ import annotations

import numpy as np

from ...graph import Operator
from .codes import Act, Binary, Unary
from .launch import Buf, contiguous_strides, i4, shape4
from .lowering_api import Lowering

#: TFLite fused activation -> the `unary` op applying it (ops whose kernel does not fuse it).
ACT_TO_UNARY = {
    Act.RELU: Unary.RELU,
    Act.RELU6: Unary.RELU6,
    Act.RELU_N1_TO_1: Unary.RELU_N1_TO_1,
    Act.SIGMOID: Unary.LOGISTIC,
    Act.TANH: Unary.TANH,
}


def activation(lw: Lowering, op: Operator, out: int) -> None:
    """A separate activation launch, for ops whose kernel does not fuse it."""
    act = op.options.get("fused_activation_function", 0)
    if act:
        n = lw.t(out).size
        code = np.int32(ACT_TO_UNARY[Act(act)])
        lw.emit_1d(op, "unary", [Buf(out), Buf(out), np.int32(n), code, np.float32(0)], n)


def qdq(lw: Lowering, op: Operator, out: int) -> None:
    """Quantize-and-dequantize after a tensor with quantization parameters."""
    t = lw.t(out)
    q = t.quantization
    if q is None or t.dtype.kind not in "iu" or q.per_channel:
        return
    if lw.view(out) is not None:  # a contiguous launch would snap the wrong values
        raise ValueError(f"tensor {out} lives in a concatenation; its kernel must snap it")
    info = np.iinfo(t.dtype)
    scale, zp = float(q.scale[0]), int(q.zero_point[0])
    lo, hi = scale * (info.min - zp), scale * (info.max - zp)
    lw.emit_1d(
        op,
        "qdq",
        [Buf(out), np.int32(t.size), np.float32(lo), np.float32(hi), np.float32(scale)],
        t.size,
    )


def unary(lw: Lowering, op: Operator, code: Unary, param: float = 0.0) -> None:
    """The `unary` launch of `code`; `param`: its parameter (LEAKY_RELU's alpha)."""
    code = Unary(code)  # an unknown code fails here, not in the kernel
    n = lw.t(op.outputs[0]).size
    args = [Buf(op.inputs[0]), Buf(op.outputs[0]), np.int32(n), np.int32(code)]
    lw.emit_1d(op, "unary", [*args, np.float32(param)], n)


def broadcast_strides(lw: Lowering, i: int, out_shape: tuple[int, ...]) -> np.ndarray:
    """The int4 strides reading tensor `i` broadcast to the 4-D `out_shape` (0 on
    broadcast dimensions)."""
    s = shape4(lw.t(i).shape)
    view = lw.view(i)
    if view is not None:  # a prefix of a concatenation's pixels (offset 0)
        return i4(view.strides4(s))
    raw = lw.t(i).shape
    if len(raw) == 2 and raw == (out_shape[0], out_shape[3]) and raw[0] not in (1, out_shape[2]):
        s = (raw[0], 1, 1, raw[1])  # [b, c] against [b, x, y, c]: the delegate's BHWC view
    cs = contiguous_strides(s)
    return i4([0 if s[k] == 1 and out_shape[k] != 1 else cs[k] for k in range(4)])


def binary(lw: Lowering, op: Operator, code: Binary) -> None:
    """The `binary4d` launch of `code`, its operands broadcast, its epilogue fused."""
    code = Binary(code)  # an unknown code fails here, not in the kernel
    out_shape = shape4(lw.t(op.outputs[0]).shape)

    def strides(i: int) -> np.ndarray:
        return broadcast_strides(lw, i, out_shape)

    a, b = op.inputs[0], op.inputs[1]
    n = int(np.prod(out_shape))
    act = op.options.get("fused_activation_function", 0)
    lw.emit_1d(
        op,
        "binary4d",
        [
            lw.operand(a),
            lw.operand(b),
            Buf(op.outputs[0]),
            i4(out_shape),
            strides(a),
            strides(b),
            np.int32(code),
            lw.oview(Buf(op.outputs[0]), out_shape[3]),
            *lw.epilogue(act),
        ],
        n,
    )
