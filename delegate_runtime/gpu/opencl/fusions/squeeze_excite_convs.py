"""A squeeze-excite in one launch: a MEAN over the pixels of a batch-1 map (or an
AVERAGE_POOL_2D over the whole map) whose kernel also runs the two 1x1 convolutions on the
one pixel it makes, each with the elementwise nodes its own chain absorbed; only the second
convolution's result, the gate, is stored (opencl/squeeze_excite.py lowers it:
docs/notebook/05-*.md, "Squeeze-excite in one launch"; its weight limit:
docs/notebook/06-*.md).

The MEAN's chain records the convolutions' chains as `then`; where a depthwise convolution
makes the MEAN's input, depthwise_into_squeeze_excite.py may add it as `first`, right as
each pair forms (the units it merges decide the next MEAN's pairing). No counterpart among
TFLite's transformations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import squeeze_excite as kernel
from ..chain import Chain
from ..records.conv import is_gemm
from ..records.pool import averages_whole_map
from . import depthwise_into_squeeze_excite
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "squeeze_excite_convs"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    the mean over pixels that runs the block, or its convolutions."""
    return record.name in ("MEAN", "AVERAGE_POOL_2D", "CONV_2D")


def fuse(scope: Scope, chains: dict[int, Chain]) -> None:
    """MEAN over the pixels of a batch-1 map (or an AVERAGE_POOL_2D over the whole map),
    read only by a 1x1 convolution whose result only a second 1x1 convolution reads: the
    MEAN's kernel runs both (its `then`), where their channels fit the kernel
    (MAX_CHANNELS) and their weights are few enough (the switches'
    squeeze_excite_max_weights: one work group computes them)."""
    sg = scope.sg
    max_channels, max_weights = kernel.MAX_CHANNELS, scope.switches.squeeze_excite_max_weights
    for m in list(chains):
        op = sg.operators[m]
        x = sg.tensors[op.inputs[0]].shape
        if op.op != "MEAN" and not averages_whole_map(op, sg):
            continue
        if len(x) != 4 or x[0] != 1 or x[-1] > max_channels:
            continue
        if sg.tensors[op.outputs[0]].size != x[-1]:
            continue  # not a mean over every pixel
        first = _only_reader_on_one_pixel(scope, chains[m].output, chains)
        if first is None:
            continue
        second = _only_reader_on_one_pixel(scope, chains[first].output, chains)
        if second is None:
            continue
        r = sg.tensors[chains[first].output].size
        n = sg.tensors[chains[second].output].size
        if max(r, n) > max_channels or x[-1] * r + r * n > max_weights:
            continue  # too much for the one work group that runs both
        pair = [chains[first], chains[second]]
        if not scope.operands_ready(m, [*pair[0].steps, *pair[1].steps]):
            continue
        for c in pair:
            scope.units.merge(m, c.producer)  # with what its chain absorbed
            del chains[c.producer]
        chains[m].then = pair
        if scope.on(depthwise_into_squeeze_excite.NAME):
            depthwise_into_squeeze_excite.fuse(scope, chains, m)


def _only_reader_on_one_pixel(scope: Scope, t: int, chains: dict[int, Chain]) -> int | None:
    """The 1x1 convolution of a one-pixel map that alone reads `t`, with a chain of its
    own and nothing absorbed before it; else None."""
    sg = scope.sg
    users = scope.readers.get(t, [])
    if len(users) != 1 or t in scope.leaving or t in sg.outputs:
        return None
    n = users[0]
    op = sg.operators[n]
    chain = chains.get(n)
    if chain is None or chain.before or op.op != "CONV_2D" or op.inputs[0] != t:
        return None
    x = sg.tensors[t].shape
    if len(x) != 4 or x[:3] != (1, 1, 1) or not is_gemm(op, sg):
        return None
    return n
