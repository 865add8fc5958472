"""Elementwise ops: the `unary` kernel and `binary4d` (4-D broadcasting), their op a code
from opencl/codes.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ....graph import Operator, Subgraph
from ..codes import Binary, Step, Unary
from .geometry import Shape, broadcast, shape_of
from .lacks import NO_STEP_CODE, UNARY_NO_EPILOGUE
from .record import Check, GpuOp, OpRule, always, register, versions
from .steps import binary_step, unary_step

if TYPE_CHECKING:
    from ..lowering_api import Lowering

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


def check_any_broadcast(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Two inputs in one of LiteRT's broadcast forms or broadcasting in numpy's way, up to
    4-D: binary4d reads any of them (LiteRT's own rule binds only ADD and MUL today)."""
    if len(op.inputs) != 2:
        return False, f"Expected 2 inputs, got {len(op.inputs)}."
    if check_binary(op, sg)[0]:  # LiteRT's forms, [b, c] against [b, h, w, c] among them
        return True, ""
    shapes = [tuple(sg.tensors[t].shape) for t in op.inputs]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return (
            False,
            f"Doesn't support broadcasting - input0: {list(shapes[0])}, input1: {list(shapes[1])}",
        )
    return True, ""


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


def unary(code: Unary, rule: OpRule, name: str | None = None) -> GpuOp:
    as_step = unary_step(Step[code.name]) if code.name in UNARY_STEPS else None
    return unary_record(name or code.name, rule, lambda lo, op: lo.unary(op, code), as_step)


def unary_record(name: str, rule: OpRule, lower, as_step=None, **more: Any) -> GpuOp:
    """An op lowered to the `unary` kernel (`more`: GpuOp's other fields): a step of its
    producer where `as_step` says how."""
    lacks = {"epilogue": UNARY_NO_EPILOGUE}
    if as_step is None:
        lacks["step"] = NO_STEP_CODE
    return GpuOp(
        name,
        rule,
        lower,
        KERNELS,
        as_step=as_step,
        launches=("unary",),
        family="elementwise",
        lacks=lacks,
        **more,
    )


def lower_leaky_relu(lo: Lowering, op: Operator) -> None:
    lo.unary(op, Unary.LEAKY_RELU, float(op.options.get("alpha", 0.0)))


def lower_gelu(lo: Lowering, op: Operator) -> None:
    lo.unary(op, Unary.GELU_TANH if op.options.get("approximate") else Unary.GELU)


def check_comparison(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Float operands only (a bool result; int32 operands stay on the CPU, as in TFLite)."""
    for t in op.inputs[:2]:
        if sg.tensors[t].dtype not in (np.float32, np.float16):
            return False, "OP is supported, but tensor type/shape isn't compatible."
    return check_any_broadcast(op, sg)


def comparison(code: Binary) -> GpuOp:
    """A comparison: binary4d writes 1 or 0, read back as bool."""
    return GpuOp(
        code.name,
        OpRule(versions(2)),
        lambda lo, op: lo.binary(op, code),
        KERNELS,
        check_comparison,
        binary_shapes,
        bool_tensors=True,
        launches=("binary4d",),
        family="elementwise",
        lacks={
            "epilogue": "a bool output, which no epilogue step takes: not done",
            "step": NO_STEP_CODE,
        },
    )


#: CAST on the GPU: (input kind, output kind) -> the unary op converting one to the other
#: (kinds: "f" float, "i" int32, "b" bool), the casts LiteRT's delegate takes.
CASTS = {
    ("f", "f"): Unary.COPY,
    ("b", "f"): Unary.COPY,
    ("i", "f"): Unary.COPY,
    ("i", "i"): Unary.COPY,
    ("f", "i"): Unary.TRUNC,
    ("f", "b"): Unary.NOT_ZERO,
}


def _cast_kind(dtype: np.dtype) -> str:
    if dtype in (np.float32, np.float16):
        return "f"
    return {np.dtype(np.int32): "i", np.dtype(np.bool_): "b"}.get(np.dtype(dtype), "?")


def _cast_pair(op: Operator, sg: Subgraph) -> tuple[str, str]:
    return _cast_kind(sg.tensors[op.inputs[0]].dtype), _cast_kind(sg.tensors[op.outputs[0]].dtype)


def check_cast(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    if len(op.inputs) != 1 or len(op.outputs) != 1:
        return False, "Expected 1 input and 1 output."
    if _cast_pair(op, sg) in CASTS:
        return True, ""
    a, b = sg.tensors[op.inputs[0]].dtype, sg.tensors[op.outputs[0]].dtype
    return False, f"Not supported Cast case. Input type: {a} and output type: {b}"


def lower_cast(lo: Lowering, op: Operator) -> None:
    lo.unary(op, CASTS[_cast_pair(op, lo.sg)])


def binary(code: Binary, rule: OpRule, checked: bool = True, check: Check = check_binary) -> GpuOp:
    return GpuOp(
        code.name,
        rule,
        lambda lo, op: lo.binary(op, code),
        KERNELS,
        check if checked else always,
        binary_shapes,
        bool_tensors=code == Binary.LOGICAL_AND,
        epilogue=True,
        as_step=(
            binary_step(Step[code.name], BINARY_STEPS[code.name])
            if code.name in BINARY_STEPS
            else None
        ),
        launches=("binary4d",),
        family="elementwise",
        lacks={} if code.name in BINARY_STEPS else {"step": NO_STEP_CODE},
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
    # ADD and MUL keep LiteRT's broadcast rule (CheckAddMulBroadcastCompatibility); the
    # others have none in LiteRT and take any broadcast here
    binary(Binary.ADD, OpRule(versions(2), versions(2))),
    binary(Binary.SUB, V1_2, check=check_any_broadcast),
    binary(Binary.MUL, OpRule(versions(1), versions(3))),
    binary(Binary.DIV, V1, check=check_any_broadcast),
    binary(Binary.MAXIMUM, V1_2, check=check_any_broadcast),
    binary(Binary.MINIMUM, V1_2, check=check_any_broadcast),
    binary(Binary.SQUARED_DIFFERENCE, V1, check=check_any_broadcast),
    binary(Binary.PRELU, V1, checked=False),
    binary(Binary.LOGICAL_AND, V1, checked=False),
    # the ops LiteRT's delegate took since (model_builder.cc's ElementwiseOperationParser)
    unary(Unary.RELU_N1_TO_1, V1),
    unary(Unary.RELU_0_TO_1, V1),
    unary_record("LEAKY_RELU", OpRule(versions(2)), lower_leaky_relu),
    unary(Unary.ABS, OpRule(versions(2))),
    unary(Unary.NEG, V1),
    unary(Unary.SIN, V1),
    unary(Unary.COS, V1),
    unary(Unary.LOG, OpRule(versions(2))),
    unary(Unary.FLOOR, V1),
    unary(Unary.SIGN, V1),
    unary(Unary.SQUARE, V1),
    unary(Unary.ELU, V1),
    unary_record("GELU", OpRule(versions(2)), lower_gelu),
    binary(Binary.POW, V1, check=check_any_broadcast),
    binary(Binary.FLOOR_DIV, OpRule(versions(2)), check=check_any_broadcast),
    binary(Binary.FLOOR_MOD, OpRule(versions(2)), check=check_any_broadcast),
    comparison(Binary.EQUAL),
    comparison(Binary.NOT_EQUAL),
    comparison(Binary.GREATER),
    comparison(Binary.GREATER_EQUAL),
    comparison(Binary.LESS),
    comparison(Binary.LESS_EQUAL),
    unary_record("CAST", V1, lower_cast, check=check_cast, int32_tensors=True, bool_tensors=True),
)
