"""How elementwise nodes become steps of their producer's epilogue (opencl/fusions/epilogue.py)."""

from __future__ import annotations

import numpy as np

from ....graph import Operator, Subgraph
from ..codes import Act, From, Step
from .record import AsStep, StepSpec

#: A binary op's fused activation as a step.
ACT_STEP = {
    Act.RELU: Step.RELU,
    Act.RELU6: Step.RELU6,
    Act.RELU_N1_TO_1: Step.RELU_N1_TO_1,
    Act.TANH: Step.TANH,
    Act.SIGMOID: Step.LOGISTIC,
}


def qdq_step(sg: Subgraph, t: int) -> list[StepSpec]:
    """The quantize-and-dequantize step after tensor `t`, if it has quantization."""
    tensor = sg.tensors[t]
    q = tensor.quantization
    if q is None or tensor.dtype.kind not in "iu" or q.per_channel:
        return []
    info = np.iinfo(tensor.dtype)
    scale, zp = float(q.scale[0]), int(q.zero_point[0])
    lo, hi = scale * (info.min - zp), scale * (info.max - zp)
    return [StepSpec(Step.QDQ, params=(lo, hi, scale, 0.0))]


def operand_source(sg: Subgraph, operand: int, like: int) -> tuple[From, float | None] | None:
    """How an epilogue reads `operand` against the output `like`: (FROM_*, scalar value)."""
    u, t = sg.tensors[operand], sg.tensors[like]
    if u.is_constant and u.size == 1:
        value = u.data.astype(np.float64).reshape(-1)[0]
        if u.data.dtype.kind in "iu" and u.quantization is not None:
            q = u.quantization
            value = (value - float(q.zero_point[0])) * float(q.scale[0])
        return From.SCALAR, float(value)
    if tuple(u.shape) == tuple(t.shape):
        return From.TENSOR, None
    if (
        len(t.shape) >= 1
        and len(u.shape) <= len(t.shape)
        and u.size == t.shape[-1]
        and (len(u.shape) == 0 or u.shape[-1] == t.shape[-1])
    ):
        return From.CHANNEL, None
    return None


def unary_step(code: Step) -> AsStep:
    """A unary op: one step, no operand."""
    return lambda op, sg, t: [StepSpec(code)]


def no_step(op: Operator, sg: Subgraph, t: int) -> list[StepSpec]:
    """An op that is a copy in the float view (QUANTIZE, DEQUANTIZE): nothing to apply;
    the quantize-and-dequantize step after its output follows it."""
    return []


def binary_step(code: Step, commutes: bool = True) -> AsStep:
    """A binary op with `t` as one input and an operand that is a scalar constant, one
    value per channel, or a tensor of the output's shape; then its fused activation."""

    def as_step(op: Operator, sg: Subgraph, t: int) -> list[StepSpec] | None:
        a, b = op.inputs
        if a == b and code == Step.ADD:  # t + t, exactly 2 * t (NASNet's paired pools)
            steps = [StepSpec(Step.MUL, From.SCALAR, None, (2.0, 0.0, 0.0, 0.0))]
        elif a == b or (not commutes and t != a):
            return None
        else:
            other = b if a == t else a
            found = operand_source(sg, other, op.outputs[0])
            if found is None:
                return None
            source, value = found
            step = Step.RSUB if code == Step.SUB and other == a else code
            operand = None if source == From.SCALAR else other
            steps = [StepSpec(step, source, operand, (value or 0.0, 0.0, 0.0, 0.0))]
        act = op.options.get("fused_activation_function", 0)
        if act:
            steps.append(StepSpec(ACT_STEP[Act(act)]))
        return steps

    return as_step
