"""SOFTMAX over the last axis, one work group per row."""

from __future__ import annotations

import numpy as np

from ....graph import Operator, Subgraph
from ..launch import Buf
from .lacks import NO_EPILOGUE
from .record import GpuOp, OpRule, Template, register, versions

#: Work items per row (softmax.cl.in declares its scratch and work-group size to match).
ROW_GROUP = 256


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    if abs(op.options.get("beta", 1.0) - 1.0) > 1e-6:
        return False, "Softmax.beta != 1 is not supported."
    return True, ""


def lower(lo, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    cols = lo.t(x).shape[-1]
    rows = lo.t(x).size // cols
    lo.emit(
        op,
        "softmax_rows",
        [Buf(x), Buf(out), np.int32(cols)],
        (rows * ROW_GROUP,),
        (ROW_GROUP,),
    )


#: Its kernels: writing storage, and writing a float32 output (a partition's edge:
#: opencl/staging_edges.py).
ROWS = Template(
    "softmax.cl.in",
    lambda: {
        "softmax_rows": {"@OUT_T@": "store_t", "@ST_OUT@": "ST"},
        "softmax_rows_f32out": {"@OUT_T@": "float", "@ST_OUT@": "ST32"},
    },
)

register(
    GpuOp(
        "SOFTMAX",
        OpRule(versions(1), versions(2)),
        lower,
        (ROWS,),
        check,
        launches=("softmax_rows",),
        family="reduction",
        lacks={"epilogue": f"softmax_rows {NO_EPILOGUE}"},
    )
)
