"""x * sigmoid(x) as one epilogue step: t read by a LOGISTIC and by the MUL of t and the
LOGISTIC's output, both absorbed by the kernel producing t (epilogue.py asks this rule
where t has two readers). In a quantized model the sigmoid is snapped to its int8 grid
inside the step (SWISH_QDQ; docs/notebook/05-*.md, "An int8 model's swish and MEAN in
their producers' epilogues").

No counterpart among TFLite's transformations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....graph import Operator
from ..codes import Step
from ..lowering_api import StepSpec
from ..records.steps import qdq_step
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "swish"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    the LOGISTIC and MUL it absorbs."""
    return record.name in ("LOGISTIC", "MUL")


def step(scope: Scope, t: int, ops: list[Operator]) -> tuple[list[int], list[StepSpec], int] | None:
    """t -> LOGISTIC -> s, MUL(t, s): ([LOGISTIC, MUL], their steps, the MUL's output);
    else None."""
    sg = scope.sg
    by_name = {op.op: op for op in ops}
    logistic, mul = by_name.get("LOGISTIC"), by_name.get("MUL")
    if logistic is None or mul is None:
        return None
    s = logistic.outputs[0]
    if (
        sorted(mul.inputs) != sorted((t, s))
        or scope.readers.get(s) != [mul.index]
        or s in scope.leaving
        or mul.options.get("fused_activation_function", 0)
        or sg.tensors[mul.outputs[0]].shape != sg.tensors[t].shape
    ):
        return None
    snap = qdq_step(sg, s)
    swish = StepSpec(Step.SWISH_QDQ, params=snap[0].params) if snap else StepSpec(Step.SWISH)
    out = mul.outputs[0]
    return [logistic.index, mul.index], [swish] + qdq_step(sg, out), out
