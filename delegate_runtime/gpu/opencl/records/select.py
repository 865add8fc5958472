"""SELECT and SELECT_V2: x where cond else y, the three broadcast together (`select4d`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....graph import Operator, Subgraph
from ..launch import Buf, i4, shape4
from .geometry import Shape, broadcast, shape_of
from .lacks import NO_EPILOGUE
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

#: TFLite's refusal, in its words (gpu_compatibility.cc's CheckSelectV2...).
REFUSED = (
    "Cond must be float or bool type, if, else tensors must either be the same shape as "
    "output or constant, scalar."
)


def select_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    return broadcast([shape_of(sg, t) for t in op.inputs[:3]])


def check_select(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Three inputs broadcasting in numpy's way (every form up to 4-D: a superset of
    LiteRT's, which takes only scalar or full-shape values); SELECT's TF1 form, a rank-1
    cond picking whole rows, stays on the CPU."""
    if len(op.inputs) != 3 or len(op.outputs) != 1:
        return False, "Expected 3 inputs and 1 output"
    cond = sg.tensors[op.inputs[0]]
    if cond.dtype not in (np.bool_, np.float32, np.float16):
        return False, REFUSED
    values = [sg.tensors[t] for t in op.inputs[1:3]]
    if any(v.dtype not in (np.float32, np.float16) for v in values):
        return False, REFUSED
    x_rank = len(values[0].shape)
    if op.op == "SELECT" and len(cond.shape) == 1 and x_rank > 1:
        return False, REFUSED  # rows picked by a vector: not a broadcast
    select_shapes(op, sg)  # raises where they do not broadcast
    return True, ""


def lower_select(lo: Lowering, op: Operator) -> None:
    out_shape = shape4(lo.t(op.outputs[0]).shape)
    cond, x, y = op.inputs[:3]
    lo.emit_1d(
        op,
        "select4d",
        [
            lo.operand(cond),
            lo.operand(x),
            lo.operand(y),
            Buf(op.outputs[0]),
            i4(out_shape),
            *(lo.broadcast_strides(t, out_shape) for t in (cond, x, y)),
        ],
        int(np.prod(out_shape)),
    )


register(
    *(
        GpuOp(
            name,
            OpRule(versions(1)),
            lower_select,
            ("elementwise.cl",),
            check_select,
            select_shapes,
            bool_tensors=True,
            launches=("select4d",),
            family="elementwise",
            lacks={
                "epilogue": f"select4d {NO_EPILOGUE}",
                "step": "a step reads one operand; SELECT reads three",
            },
        )
        for name in ("SELECT", "SELECT_V2")
    )
)
