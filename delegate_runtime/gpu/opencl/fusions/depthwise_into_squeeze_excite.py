"""A squeeze-excite kernel (squeeze_excite_convs.py) that also computes the depthwise
convolution making its input: one launch instead of two. The depthwise output is still
stored, for its other reader (the gate's MUL), which must not be one the MEAN waits on
(docs/notebook/09-*.md, "A squeeze-excite that computes its depthwise input").

The MEAN's chain records the depthwise convolution's chain as `first`. No counterpart
among TFLite's transformations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..chain import Chain
from ..records.depthwise import fuses_into_reader
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "depthwise_into_squeeze_excite"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    the mean over pixels that runs it, or the depthwise convolution."""
    return record.name in ("MEAN", "AVERAGE_POOL_2D", "DEPTHWISE_CONV_2D")


def fuse(scope: Scope, chains: dict[int, Chain], m: int) -> None:
    """The squeeze-excite kernel of MEAN `m` computes its input as well, where a depthwise
    convolution's chain (multiplier 1, a window wider than a pixel, at most the switches'
    squeeze_excite_dw_max_channels channels, nothing absorbed before it but a PAD) makes
    it."""
    sg, units = scope.sg, scope.units
    x = sg.operators[m].inputs[0]
    d = units.unit.get(scope.produced_by.get(x, -1))  # the head of the kernel writing x
    chain = chains.get(d) if d is not None and d != units.unit[m] else None
    if chain is None or chain.output != x:
        return
    dw = sg.operators[d]
    if dw.op != "DEPTHWISE_CONV_2D" or not fuses_into_reader(dw, sg):
        return
    if sg.tensors[x].shape[-1] > scope.switches.squeeze_excite_dw_max_channels:
        return
    if chain.then or chain.first or chain.input_scale or chain.input_affine:
        return
    if chain.input_depthwise is not None:
        return
    if chain.input_mean is not None:
        return
    head = units.unit[m]
    for u in units.successors(units.unit[d]):
        if u != head and units.reaches(u, head):
            return
    units.merge(m, d)  # with its PAD and what its chain absorbed
    chains[m].first = chains.pop(d)
