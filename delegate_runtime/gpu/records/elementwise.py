"""Elementwise ops: the `unary` kernel and `binary4d` (4-D broadcasting), their op a code
from opencl/codes.py."""

from __future__ import annotations

from ...graph import Operator, Subgraph
from ..opencl.codes import Binary, Step, Unary
from .geometry import Shape, broadcast, shape_of
from .record import GpuOp, OpRule, always, register, versions
from .steps import binary_step, unary_step

KERNELS = ("elementwise.cl",)


def check_binary(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Two inputs, with a broadcast the delegate handles."""
    if len(op.inputs) != 2:
        return False, f"Expected 2 inputs, got {len(op.inputs)}."
    a, b = op.inputs[0], op.inputs[1]
    sa, sb = list(sg.tensors[a].shape), list(sg.tensors[b].shape)
    if sa == sb or sg.tensors[b].is_constant or sg.tensors[a].is_constant:
        return True, ""
    big, small = (sa, sb) if len(sa) >= len(sb) else (sb, sa)
    ok = (
        (len(big) == 4 and len(small) == 3 and big[0] == 1 and big[1:] == small)
        or (len(big) == 4 and small in ([1, 1], [1]))
        or (len(big) == 4 and len(small) == 2 and small == [big[0], big[3]])
        or (len(big) == len(small) and all(s in (1, d) for s, d in zip(small, big, strict=True)))
    )
    if ok:
        return True, ""
    return False, f"Doesn't support broadcasting - input0: {sa}, input1: {sb}"


def binary_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """The inputs' broadcast, a [b, c] operand of a 4-D op seen as [b, 1, 1, c] (the
    delegate's BHWC view, as the lowering reads it)."""
    shapes = [shape_of(sg, t) for t in op.inputs]
    big = max(shapes, key=len)
    views = [
        (s[0], 1, 1, s[1])
        if len(big) == 4 and len(s) == 2 and s == (big[0], big[3]) and s[0] not in (1, big[2])
        else s
        for s in shapes
    ]
    return broadcast(views)


#: Unary ops that run as a step of their producer's epilogue.
UNARY_STEPS = {"RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "HARD_SWISH"}
#: Binary ops that do: ADD, SUB, MUL with any operand order; PRELU with its input first.
BINARY_STEPS = {"ADD": True, "SUB": True, "MUL": True, "PRELU": False}


def unary(code: Unary, rule: OpRule) -> GpuOp:
    as_step = unary_step(Step[code.name]) if code.name in UNARY_STEPS else None
    return GpuOp(code.name, rule, lambda lo, op: lo.unary(op, code), KERNELS, as_step=as_step)


def binary(code: Binary, rule: OpRule, checked: bool = True) -> GpuOp:
    return GpuOp(
        code.name,
        rule,
        lambda lo, op: lo.binary(op, code),
        KERNELS,
        check_binary if checked else always,
        binary_shapes,
        bool_tensors=code == Binary.LOGICAL_AND,
        epilogue=True,
        as_step=(
            binary_step(Step[code.name], BINARY_STEPS[code.name])
            if code.name in BINARY_STEPS
            else None
        ),
    )


V1, V1_2 = OpRule(versions(1)), OpRule(versions(1), versions(2))
register(
    unary(Unary.RELU, V1_2),
    unary(Unary.RELU6, V1_2),
    unary(Unary.LOGISTIC, V1_2),
    unary(Unary.TANH, V1_2),
    unary(Unary.EXP, V1_2),
    unary(Unary.HARD_SWISH, V1),
    unary(Unary.RSQRT, V1_2),
    unary(Unary.SQRT, V1),
    binary(Binary.ADD, OpRule(versions(2), versions(2))),
    binary(Binary.SUB, V1_2),
    binary(Binary.MUL, OpRule(versions(1), versions(3))),
    binary(Binary.DIV, V1),
    binary(Binary.MAXIMUM, V1_2),
    binary(Binary.MINIMUM, V1_2),
    binary(Binary.SQUARED_DIFFERENCE, V1),
    binary(Binary.PRELU, V1, checked=False),
    binary(Binary.LOGICAL_AND, V1, checked=False),
)
