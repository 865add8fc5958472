"""CUMSUM along a constant axis (exclusive and reverse forms): `cumsum_axis` (cumsum.cl)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf
from .geometry import Shape, const_ints, shape_of
from .lacks import MEASURED_GENERIC, NO_EPILOGUE, NOT_SPECIALIZED
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

#: TFLite's refusal, in its words (gpu_compatibility.cc's CheckCumsumGpuDelegateCompatibility).
REFUSED = "Input/output must be float type and indices must be constant int32 type"
FLOATS = (np.float32, np.float16)


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's conditions: two inputs, one output, float input and output of one type,
    a constant int32 axis. Any axis of a tensor up to 4-D, negative ones included, and
    the exclusive and reverse options honoured (LiteRT's parser ignores both options and
    indexes its axis table with a negative axis unchecked)."""
    if len(op.inputs) != 2 or len(op.outputs) != 1:
        return False, "Expects 2 inputs and 1 output"
    x, axis = sg.tensors[op.inputs[0]], op.inputs[1]
    out = sg.tensors[op.outputs[0]]
    if x.dtype not in FLOATS or out.dtype != x.dtype:
        return False, REFUSED
    if axis < 0 or sg.tensors[axis].dtype != np.int32 or not sg.tensors[axis].is_constant:
        return False, REFUSED
    return True, ""


def cumsum_axis(op: Operator, sg: Subgraph) -> int:
    """The axis, non-negative; ModelError where it is not one axis of the input."""
    rank = len(shape_of(sg, op.inputs[0]))
    axes = const_ints(sg, op.inputs[1], "axis")
    if len(axes) != 1 or not -rank <= axes[0] < rank:
        raise ModelError(f"axis {axes} is not an axis of a rank-{rank} input")
    return axes[0] % rank


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    cumsum_axis(op, sg)
    return [shape_of(sg, op.inputs[0])]


def lower(lo: Lowering, op: Operator) -> None:
    shape = lo.t(op.inputs[0]).shape
    axis = cumsum_axis(op, lo.sg)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    args = [
        lo.operand(op.inputs[0]),
        Buf(op.outputs[0]),
        *map(np.int32, (outer, shape[axis], inner)),
        np.int32(bool(op.options.get("exclusive", False))),
        np.int32(bool(op.options.get("reverse", False))),
    ]
    lo.emit_1d(op, "cumsum_axis", args, outer * inner)


register(
    GpuOp(
        "CUMSUM",
        OpRule(versions(1)),
        lower,
        ("cumsum.cl",),
        check,
        shapes,
        launches=("cumsum_axis",),
        family="reduction",
        lacks={
            "specialized": f"cumsum_axis {MEASURED_GENERIC}",
            "persistent": NOT_SPECIALIZED,
            "epilogue": f"cumsum_axis {NO_EPILOGUE}",
        },
        on_demand=("cumsum.cl",),
    )
)
