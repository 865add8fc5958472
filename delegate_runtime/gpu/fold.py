"""Fold what is static before partitioning, as the delegate's graph transforms do.

SHAPE of a tensor with a fully known shape becomes a constant; then every op whose inputs
are all constant (STRIDED_SLICE -> PACK -> RESHAPE shape chains, DEQUANTIZE of fp16 or
int8 weights, DENSIFY of sparse weights) is evaluated once with the reference kernels and
its outputs become constants. Converted Keras models then delegate whole.
"""

from __future__ import annotations

import copy

import numpy as np

from ..graph import Model, Operator, Subgraph
from ..ops.registry import OpContext, lookup
from .switches import DEFAULTS

#: Ops never folded even with constant inputs (side effects, subgraphs, state).
NEVER_FOLD = {
    "WHILE",
    "IF",
    "CALL_ONCE",
    "CALL",
    "VAR_HANDLE",
    "READ_VARIABLE",
    "ASSIGN_VARIABLE",
    "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "LSTM",
}


def _fold_one(op: Operator, sg: Subgraph, max_elements: int) -> list[np.ndarray] | None:
    if op.op in NEVER_FOLD or any(sg.tensors[t].is_variable for t in op.inputs if t >= 0):
        return None
    if op.op == "SHAPE":  # the delegate runs on the shapes it was prepared with
        out_dtype = sg.tensors[op.outputs[0]].dtype
        return [np.array(sg.tensors[op.inputs[0]].shape, dtype=out_dtype)]
    if not all(t < 0 or sg.tensors[t].is_constant for t in op.inputs):
        return None
    kernel, _ = lookup(op.op, op.version)
    if kernel is None:
        return None
    ctx = OpContext(
        op=op,
        inputs=[sg.tensors[t].data if t >= 0 else None for t in op.inputs],
        in_tensors=[sg.tensors[t] if t >= 0 else None for t in op.inputs],
        out_tensors=[sg.tensors[t] for t in op.outputs],
        run_subgraph=lambda *_: [],
    )
    result = kernel.fn(ctx)
    outs = [result] if isinstance(result, np.ndarray) else list(result)
    if len(outs) != len(op.outputs):  # left to the interpreter, which names the mismatch
        return None
    # DENSIFY always folds, as in TFLite's delegate: the reader holds its dense data already.
    if op.op != "DENSIFY" and any(np.asarray(o).size > max_elements for o in outs):
        return None
    return [np.asarray(o) for o in outs]


def fold_constants(
    model: Model, max_elements: int = DEFAULTS.max_folded_elements
) -> tuple[Model, int]:
    """A copy of `model` with static ops folded into constants; returns it and the count.
    An op whose output would have more than `max_elements` stays a runtime op (the
    switches' `max_folded_elements`)."""
    folded_model = copy.copy(model)
    folded_model.subgraphs = []
    total = 0
    for sg in model.subgraphs:
        tensors = [copy.copy(t) for t in sg.tensors]
        work = Subgraph(sg.name, tensors, [], sg.inputs, sg.outputs)
        for op in sg.operators:
            kept = any(t in sg.outputs for t in op.outputs)
            outs = None if kept else _fold_one(op, work, max_elements)
            if outs is None:
                work.operators.append(op)
                continue
            total += 1
            for t, value in zip(op.outputs, outs, strict=True):
                tensor = tensors[t]
                value = value.astype(tensor.dtype, copy=False)
                value.flags.writeable = False
                tensor.data = value
                tensor.shape = tuple(value.shape)
        work.operators = [
            Operator(i, o.op, o.code, o.version, o.inputs, o.outputs, o.options, o.intermediates)
            for i, o in enumerate(work.operators)
        ]
        folded_model.subgraphs.append(work)
    return folded_model, total
