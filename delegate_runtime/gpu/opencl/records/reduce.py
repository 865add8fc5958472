"""SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD over constant axes: `reduce4d` (reduce.cl)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....dtypes import NUMPY_TO_TFLITE, TYPE_NAMES
from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..codes import Reduce
from ..launch import Buf, contiguous_strides, i4, shape4
from .geometry import Shape, const_ints, shape_of
from .lacks import MEASURED_GENERIC, NO_EPILOGUE, NOT_SPECIALIZED
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

WIDE_GROUP = 256  #: reduce4d_wide's work group (reduce.cl)

#: op -> its REDUCE_* code
CODES = {
    "SUM": Reduce.SUM,
    "REDUCE_MAX": Reduce.MAX,
    "REDUCE_MIN": Reduce.MIN,
    "REDUCE_PROD": Reduce.PROD,
}


def type_name(dtype: np.dtype) -> str:
    """TFLite's name of a tensor type (TfLiteTypeGetName's)."""
    return TYPE_NAMES.get(NUMPY_TO_TFLITE.get(np.dtype(dtype), -1), str(dtype))


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """gpu_compatibility.cc's reduce case: one runtime input, one constant input, one
    output, and the axes a constant int32 tensor. Any axes of a tensor up to 4-D, with
    keep_dims either way (as LiteRT)."""
    present = [t for t in op.inputs if t >= 0]
    consts = sum(sg.tensors[t].is_constant for t in present)
    if consts != 1:
        return False, f"Expected 1 const input tensor(s), but node has {consts} const input(s)."
    if len(present) - consts != 1:
        runtime = len(present) - consts
        return (
            False,
            f"Expected 1 runtime input tensor(s), but node has {runtime} runtime input(s).",
        )
    if len(op.outputs) != 1:
        return False, f"Expected 1 output tensor(s), but node has {len(op.outputs)} output(s)."
    if len(op.inputs) < 2 or op.inputs[1] < 0 or not sg.tensors[op.inputs[1]].is_constant:
        return False, f"{op.op} is only supported with constant axes."
    axes = sg.tensors[op.inputs[1]]
    if axes.dtype != np.int32:
        return (
            False,
            f"{op.op} supports int32 tensor for axes. But node has {type_name(axes.dtype)}",
        )
    return True, ""


def reduced_axes(op: Operator, sg: Subgraph) -> list[int]:
    """The axes reduced, non-negative, each once, in order; ModelError out of range."""
    rank = len(shape_of(sg, op.inputs[0]))
    axes = const_ints(sg, op.inputs[1], "axis")
    if rank == 0:
        return []
    if any(not -rank <= a < rank for a in axes):
        raise ModelError(f"axes {axes} out of range for rank {rank}")
    return sorted({a % rank for a in axes})


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    reduced = set(reduced_axes(op, sg))
    if op.options.get("keep_dims", False):
        return [tuple(1 if i in reduced else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in reduced)]


def lower(lo: Lowering, op: Operator) -> None:
    """The output seen as the input's 4-D shape with the reduced axes 1 (its order is the
    same with keep_dims or without), each element the reduction of its box."""
    x, out = op.inputs[0], op.outputs[0]
    in4 = shape4(lo.t(x).shape)
    shift = 4 - len(lo.t(x).shape)
    reduced = {a + shift for a in reduced_axes(op, lo.sg)}
    box = [in4[k] if k in reduced else 1 for k in range(4)]
    out4 = [1 if k in reduced else in4[k] for k in range(4)]
    args = [
        Buf(x),
        Buf(out),
        i4(out4),
        i4(box),
        i4(contiguous_strides(in4)),
        np.int32(CODES[op.op]),
    ]
    total = int(np.prod(out4))
    # from the switches' reduce_wide_from elements per output a work group shares each
    # output (reduce4d_wide) rather than one item summing them alone (reduce4d)
    if int(np.prod(box)) >= lo.switches.reduce_wide_from:
        lo.emit(op, "reduce4d_wide", args, (total * WIDE_GROUP,), (WIDE_GROUP,))
    else:
        lo.emit_1d(op, "reduce4d", args, total)


#: op -> its versions with quantization enabled (TFLite's last: int16 inputs, which the
#: common type rule refuses, as LiteRT's parser, which checks no version, does)
QUANT_VERSIONS = {"SUM": 2, "REDUCE_MAX": 3, "REDUCE_MIN": 3, "REDUCE_PROD": 2}

register(
    *(
        GpuOp(
            name,
            OpRule(versions(1), versions(QUANT_VERSIONS[name])),
            lower,
            ("reduce.cl",),
            check,
            shapes,
            launches=("reduce4d", "reduce4d_wide"),
            family="reduction",
            lacks={
                "specialized": f"reduce4d {MEASURED_GENERIC}",
                "persistent": NOT_SPECIALIZED,
                "epilogue": f"reduce4d {NO_EPILOGUE}",
            },
            on_demand=("reduce.cl",),
        )
        for name in CODES
    )
)
