"""Squeeze-and-excite as one launch: MEAN over the pixels (or an average pool over the whole
map, with its activation), then the two 1x1 convolutions on that one pixel, each with the
elementwise nodes fused into it (squeeze_excite.cl).

opencl/fusions/squeeze_excite_convs.py finds the pattern (a MEAN chain whose `then` holds
the two convolutions' chains) and depthwise_into_squeeze_excite.py the depthwise
convolution making its input (its `first`); here it is lowered. The mean and the hidden vector stay in the kernel's local memory; only the second
convolution's result (the gate) is written, and the depthwise output where there is one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...graph import Operator
from ..switches import DEFAULTS, Switches
from .launch import Buf, Counters, Scratch, shape4
from .records import depthwise
from .records.conv import gemm_weights
from .records.mean import WIDE_GROUP, slicing

if TYPE_CHECKING:
    from .chain import Chain
    from .lowering_api import Lowering

#: The most channels the kernel takes, in, hidden and out (SE_MAX in the kernel). The
#: limits measured for speed (the weights, the depthwise work's split) are the session's
#: switches (squeeze_excite_* in gpu/switches.py).
MAX_CHANNELS = 2048


def depthwise_kernel(c: int) -> tuple[str, int]:
    """The kernel computing a depthwise input of `c` channels, and the rows of pixels its
    work group's items form: four channels per item where C % 4 == 0 (8 quads of 32
    channels, 32 rows), else one (32 channels, 8 rows)."""
    if c % 4 == 0:
        return "squeeze_excite_dw4", WIDE_GROUP[0] * WIDE_GROUP[1] // 8
    return "squeeze_excite_dw", WIDE_GROUP[1]


def depthwise_slicing(
    inner: int, c: int, compute_units: int, switches: Switches = DEFAULTS
) -> tuple[int, int]:
    """(slices, pixels per slice) for depthwise_kernel(c): the switches'
    squeeze_excite_dw_groups_per_cu work groups per compute unit, within
    squeeze_excite_dw_tail_loads loads per item for the last group's reading of the
    partial sums (slices x channels), and at least a pixel per row of a group's items."""
    items = WIDE_GROUP[0] * WIDE_GROUP[1]
    _, rows = depthwise_kernel(c)
    blocks = -(-c // WIDE_GROUP[0])
    slices = min(
        -(-switches.squeeze_excite_dw_groups_per_cu * compute_units // blocks),
        switches.squeeze_excite_dw_tail_loads * items // c,
        -(-inner // rows),
    )
    per_slice = -(-inner // max(slices, 1))
    return -(-inner // per_slice), per_slice


def lower(lo: Lowering, mean: Operator, chain: Chain) -> None:
    """The launch of a MEAN chain with `then` = (first, second convolution's chains), and
    with `first` the depthwise chain making its input."""
    first, second = chain.then
    conv1, conv2 = lo.sg.operators[first.producer], lo.sg.operators[second.producer]
    x = mean.inputs[0]
    _, h, w, c = shape4(lo.t(x).shape)
    inner = h * w
    if chain.first is None:
        slices, per_slice = slicing(inner)
    else:
        slices, per_slice = depthwise_slicing(inner, c, lo.compute_units, lo.switches)
    w1, b1, r = gemm_weights(lo, conv1)
    w2, b2, n = gemm_weights(lo, conv2)
    epilogues: list[Any] = []
    for steps, op in ((chain.steps, mean), (first.steps, conv1), (second.steps, conv2)):
        lo.steps = steps
        epilogues += lo.epilogue(op.options.get("fused_activation_function", 0))
    lo.steps = chain.steps
    args = [Buf(second.output), *map(np.int32, (inner, c, per_slice))]
    args += [Scratch(4 * slices * c), Counters(1), w1, b1, np.int32(r), w2, b2, np.int32(n)]
    blocks = -(-c // WIDE_GROUP[0])
    gsize = (blocks * WIDE_GROUP[0], slices * WIDE_GROUP[1])
    if chain.first is None:
        lo.emit(mean, "squeeze_excite", [Buf(x), *args, *epilogues], gsize, WIDE_GROUP[:2])
        return
    dw = lo.sg.operators[chain.first.producer]
    if chain.first.output != dw.outputs[0]:
        lo.out.alias[dw.outputs[0]] = chain.first.output  # the kernel stores the chain's end
    outer_pad, lo.input_pad = lo.input_pad, chain.first.input_pad
    try:
        window = depthwise.window_args(lo, dw)
        lo.steps = chain.first.steps
        dw_epilogue = lo.epilogue(dw.options.get("fused_activation_function", 0))
    finally:
        lo.input_pad, lo.steps = outer_pad, chain.steps
    args = [*window, Buf(x), *dw_epilogue, *args, *epilogues]
    lo.emit(mean, depthwise_kernel(c)[0], args, gsize, WIDE_GROUP[:2])
