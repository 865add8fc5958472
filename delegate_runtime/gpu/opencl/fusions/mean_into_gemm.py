"""A MEAN over the pixels of a map run by the GEMM that alone reads it: each mean is
computed as the GEMM loads A, and the MEAN's launch goes (docs/notebook/07-*.md, "A MEAN
inside the GEMM that reads it"). It takes the MEANs the squeeze-excite kernel did not
(squeeze_excite_convs.py runs first).

The GEMM's chain records it as `before = [MEAN]` and `input_mean`. TFLite's nearest
transformation, `common/transformations/global_pooling_to_reduce_op.cc`, goes the other
way: it makes a whole-map pooling a MEAN, a launch of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..chain import Chain
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "mean_into_gemm"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that computes its input as a mean, or the MEAN."""
    return record.input_mean is not None or record.name == "MEAN"


def fuse(scope: Scope, chains: dict[int, Chain]) -> None:
    """A MEAN over the pixels of a map that a squeeze-excite kernel did not take, read only
    by a kernel that can compute its input as a mean (a GEMM of at most the switches'
    mean_max_reader_channels outputs: it recomputes the means per tile of them): that
    kernel runs it."""
    sg = scope.sg
    for m in list(chains):
        op, chain = sg.operators[m], chains[m]
        if op.op != "MEAN" or chain.then or chain.absorbed or chain.steps or chain.before:
            continue
        x = sg.tensors[op.inputs[0]].shape
        if len(x) != 4 or sg.tensors[chain.output].size != x[0] * x[3]:
            continue  # not a mean over every pixel of each image
        users = scope.readers.get(chain.output, [])
        if len(users) != 1 or chain.output in scope.leaving or chain.output in sg.outputs:
            continue
        n = users[0]
        reader = chains.get(n)
        if reader is None or reader.before or sg.operators[n].inputs[0] != chain.output:
            continue
        if not scope.kernel_can(n, "input_mean"):
            continue
        if (
            sg.tensors[sg.operators[n].outputs[0]].shape[-1]
            > scope.switches.mean_max_reader_channels
        ):
            continue
        reader.before, reader.input_mean = [m], m
        scope.units.merge(n, m)
        del chains[m]
