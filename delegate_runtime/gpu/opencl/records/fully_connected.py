"""FULLY_CONNECTED: the tiled GEMM with the weights transposed once to [K, N]."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf
from ..lowering_api import ReadA
from .gemm_kernel import GEMM
from .geometry import Shape, shape_of
from .lacks import NOT_PER_ELEMENT
from .mean import prologue_args as mean_prologue
from .record import GpuOp, OpRule, register, versions


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    if op.options.get("weights_format", 0) != 0:
        return False, "Unsupported FullyConnected weights format."
    if sg.tensors[op.inputs[0]].is_constant:
        return False, "FullyConnected doesn't support constant input."
    if not sg.tensors[op.inputs[1]].is_constant:
        return False, "Weights must be constant."
    if op.options.get("keep_num_dims") and len(sg.tensors[op.inputs[0]].shape) != len(
        sg.tensors[op.outputs[0]].shape
    ):
        return False, "Input and output ranks must be equal with keep_num_dims."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x, w = shape_of(sg, op.inputs[0]), shape_of(sg, op.inputs[1])
    size = int(np.prod(x, dtype=np.int64))
    keep = op.options.get("keep_num_dims", False)
    if len(w) != 2 or w[1] <= 0 or not x or (x[-1] != w[1] if keep else size % w[1]):
        raise ModelError(f"weights {list(w)} do not fit input {list(x)}")
    return [(*x[:-1], w[0]) if keep else (size // w[1], w[0])]


def lower(lo, op: Operator) -> None:
    x, w_i, out = op.inputs[0], op.inputs[1], op.outputs[0]
    w = lo.const_float(w_i)
    n, k = w.shape
    m = lo.t(x).size // k
    weights = lo.add_const(f"t{w_i}:kn", w.T)
    act = op.options.get("fused_activation_function", 0)
    a, mean = Buf(x), None
    if lo.input_mean is not None:  # the MEAN over the pixels before it, absorbed
        a, mean = mean_prologue(lo, lo.sg.operators[lo.input_mean], k)
    lo.gemm(op, (a, weights, lo.bias(op, 2, n), Buf(out)), (m, n, k), act, ReadA(mean=mean))


def reads_channels(op: Operator, sg: Subgraph) -> bool:
    """Whether each input row is one image's channels (K is the input's last axis), so the
    GEMM can compute its input as a MEAN over pixels."""
    return shape_of(sg, op.inputs[1])[1] == shape_of(sg, op.inputs[0])[-1]


register(
    GpuOp(
        "FULLY_CONNECTED",
        OpRule(versions(1), versions(9)),
        lower,
        ("depthwise_at.cl", GEMM),
        check,
        shapes,
        epilogue=True,
        input_mean=reads_channels,
        launches=("gemm*",),
        family="convolution",
        lacks={"step": NOT_PER_ELEMENT},
    )
)
