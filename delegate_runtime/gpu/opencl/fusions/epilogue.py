"""Elementwise nodes after a kernel run in its epilogue: a node whose record takes an
epilogue (convolutions, GEMMs, pooling, binary ops) absorbs the chain of elementwise nodes
after it, each one a step: activations, ADD, SUB, MUL and PRELU with a scalar,
per-channel or same-shape operand (`records/steps.py`), QUANTIZE and DEQUANTIZE, and the
quantize-and-dequantize step after every quantized tensor; x * sigmoid(x) is one step
(swish.py).

The chain stops at a tensor that anything else reads, that leaves the partition, at
MAX_STEPS, or where a step's operand is computed from this kernel's own output (an operand
made later in the model's order is computed first: opencl/schedule.py). The chain records
the nodes as `absorbed`, their `steps`, and the tensor the kernel finally writes as
`output`. TFLite's counterpart: the "linkable" elementwise operations its GPU delegate
merges into the operation before them (`GPUOperation::AddOperation`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..chain import Chain
from ..lowering_api import StepSpec
from ..records import record_for
from ..records.steps import qdq_step
from . import swish
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "epilogue"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel with an epilogue, or an op that is a step of one."""
    return record.epilogue or record.as_step is not None


#: Steps one kernel's epilogue applies (the EPILOGUE_PARAMS of common.cl).
MAX_STEPS = 3


def grow(scope: Scope, chain: Chain, free: set[int]) -> None:
    """Absorb into `chain` the nodes after its output, one or two at a time, while the
    kernel can take them; `free`: the nodes no kernel has taken yet."""
    n = chain.producer
    while True:
        nxt = _absorb_next(scope, chain, free)
        if nxt is None:
            break
        absorbed, steps, out = nxt
        if len(chain.steps) + len(steps) > MAX_STEPS:
            break
        if not scope.operands_ready(n, steps):
            break  # its operand waits on this kernel's own output
        for a in absorbed:
            scope.units.merge(n, a)
        chain.absorbed += absorbed
        chain.steps += steps
        chain.output = out


def _absorb_next(
    scope: Scope, chain: Chain, free: set[int]
) -> tuple[list[int], list[StepSpec], int] | None:
    """The next node(s) the chain can take in after its output, with their steps."""
    sg = scope.sg
    t = chain.output
    users = scope.readers.get(t, [])
    if t in scope.leaving or t in sg.outputs or not users or not set(users) <= free:
        return None
    ops = [sg.operators[u] for u in users]
    if len(ops) == 2:
        return swish.step(scope, t, ops) if scope.on(swish.NAME) else None
    if len(ops) != 1:
        return None
    op = ops[0]
    record = record_for(op.op)
    if record is None or record.as_step is None or len(op.outputs) != 1:
        return None
    out = op.outputs[0]
    if sg.tensors[out].shape != sg.tensors[t].shape:
        return None
    steps = record.as_step(op, sg, t)
    if steps is None:
        return None
    return [op.index], steps + qdq_step(sg, out), out
