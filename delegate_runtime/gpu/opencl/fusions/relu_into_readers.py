"""A RELU (or RELU6) that no kernel absorbed, elided into its readers: each reader's
kernel clamps the values it loads from the RELU's input, and the RELU launches nothing.
NASNet's cells apply a RELU to each input of every separable convolution, whose input
other branches read unclamped, so no epilogue can take it (docs/notebook/12-*.md, "What
changed").

Readers that can clamp: 1x1 convolutions (GEMMs) reading it as their input with nothing
absorbed before them, depthwise convolutions that such a GEMM computes as it loads
(depthwise_into_gemm.py), and depthwise convolutions on the general kernel. Each reader's
chain records the RELU's output in `clamped`; the first reader's records the RELU in
`clamps` (its kernel is named after it). No counterpart among TFLite's transformations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....graph import Subgraph
from ..chain import Chain
from ..records.conv import is_gemm
from ..records.depthwise import clamps_its_input
from .scope import Scope, plain_float

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "relu_into_readers"

#: Activation nodes a reader can apply to its input as it loads it, as (low, high) clamps
#: (RELU_N1_TO_1 is no GPU op: TFLite's delegate refuses it as a node).
CLAMPS = {"RELU": (0.0, np.inf), "RELU6": (0.0, 6.0)}


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    the RELU or RELU6 elided, or a convolution that clamps what it reads."""
    return record.name in (*CLAMPS, "CONV_2D", "DEPTHWISE_CONV_2D")


def fuse(scope: Scope, chains: dict[int, Chain]) -> None:
    """Elide each float RELU that no kernel absorbed and whose readers all clamp what
    they load; the readers' chains read the RELU's input instead."""
    sg = scope.sg
    computing = {c.input_depthwise: c for c in chains.values() if c.input_depthwise is not None}
    absorbed = {m for c in chains.values() for m in c.nodes}
    for r in scope.nodes:
        op = sg.operators[r]
        if op.op not in CLAMPS or r in absorbed or r in chains:
            continue
        x, y = op.inputs[0], op.outputs[0]
        if y in scope.leaving or y in sg.outputs or not plain_float(sg, (x, y)):
            continue
        users = scope.readers.get(y, [])
        takers = [_clamping_reader(sg, u, y, chains, computing) for u in users]
        if not users or not set(users) <= scope.inside or any(t is None for t in takers):
            continue
        for taker in takers:
            taker.clamped[y] = (x, *CLAMPS[op.op])
        takers[0].clamps.append(r)


def _clamping_reader(
    sg: Subgraph, u: int, y: int, chains: dict[int, Chain], computing: dict[int, Chain]
) -> Chain | None:
    """The chain whose kernel loads node u's input y and can clamp it as it does, or None."""
    op = sg.operators[u]
    if op.inputs.count(y) != 1 or op.inputs[0] != y:
        return None
    if op.op == "DEPTHWISE_CONV_2D":
        reader = computing.get(u)  # the GEMM computing this depthwise output
        if reader is not None:
            return reader if reader.before == [u] else None
        chain = chains.get(u)  # its own kernel, where that is the general one
        if chain is None or chain.before or not clamps_its_input(op, sg):
            return None
        return chain
    chain = chains.get(u)
    if chain is None or op.op != "CONV_2D" or not is_gemm(op, sg):
        return None
    if chain.before or chain.then or chain.first or chain.input_mean is not None:
        return None
    return chain
