"""QUANTIZE and DEQUANTIZE in the float view of a quantized model: the values are already
float, so DEQUANTIZE shares its input's buffer and QUANTIZE is a copy that the lowering's
quantize-and-dequantize step then snaps to the output's grid."""

from __future__ import annotations

from ....graph import Operator
from ..codes import Unary
from .lacks import UNARY_NO_EPILOGUE
from .record import GpuOp, OpRule, register, versions
from .steps import no_step


def lower_dequantize(lo, op: Operator) -> None:
    lo.out.alias[op.outputs[0]] = op.inputs[0]


register(
    GpuOp(  # only in the float view of quantized models
        "QUANTIZE",
        OpRule((), versions(2)),
        lambda lo, op: lo.unary(op, Unary.COPY),
        ("elementwise.cl",),
        as_step=no_step,
        launches=("unary",),
        family="elementwise",
        lacks={"epilogue": UNARY_NO_EPILOGUE},
    ),
    GpuOp(
        "DEQUANTIZE",
        OpRule(versions(3), versions(3)),
        lower_dequantize,
        as_step=no_step,
        launches=(),
        family="elementwise",
        lacks={"epilogue": "it launches nothing: its output is its input's buffer"},
    ),
)
