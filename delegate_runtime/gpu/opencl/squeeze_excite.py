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
from .launch import Buf, Counters, Scratch, shape4
from .records import depthwise
from .records.conv import gemm_weights
from .records.mean import WIDE_GROUP, slicing

if TYPE_CHECKING:
    from .chain import Chain
    from .lowering_api import Lowering

#: The most channels the kernel takes, in, hidden and out (SE_MAX in the kernel).
MAX_CHANNELS = 2048
#: The most weights of the two convolutions together. One work group computes them, so
#: its time grows with them; on an H200 (`bench/diag_gpu.py --only timeline`, fp32) the
#: kernel took 11-13 us up to 4,800 weights, 16-18 us at 19,200, 20-27 us at 37,632 and
#: 41,472, against about 30 us for the three launches it replaces (MEAN, two GEMMs), but
#: 42-50 us at 110,592 (EfficientNetB0's last blocks) and 56-58 us at 165,888
#: (MobileNetV3Small's) (docs/notebook/06-*.md, "Squeeze-excite").
#: fusions/squeeze_excite_convs.py reads it and MAX_CHANNELS at each call.
MAX_WEIGHTS = 50_000


#: Where the kernel computes its depthwise input, that work is spread over the device: work
#: groups per compute unit it aims for, while the last group's reading of the partial sums
#: (slices x channels, over its items) stays within DW_TAIL_LOADS loads per item. On an
#: H200 (EfficientNetB0's blocks, profiled) 4 and 64 ran its first six blocks in 136 us
#: against 141 for the two launches each replaces; 2 and 16 left the depthwise work too few
#: groups (its 112x112x32 block 28 us against 20) (docs/notebook/09-*.md, "A squeeze-excite
#: that computes its depthwise input").
DW_GROUPS_PER_CU = 4
DW_TAIL_LOADS = 64
#: The most channels of a depthwise convolution the kernel computes. Past them the slices
#: its depthwise work needs make the last group's reading dear: on the H200 EfficientNetB0's
#: 14x14x672 blocks took 39 us against 31-35 for the two launches, its 480-channel ones
#: 28-31 against 28-32 (docs/notebook/09-*.md, as above). Read by
#: fusions/depthwise_into_squeeze_excite.py.
DW_MAX_CHANNELS = 512


def depthwise_kernel(c: int) -> tuple[str, int]:
    """The kernel computing a depthwise input of `c` channels, and the rows of pixels its
    work group's items form: four channels per item where C % 4 == 0 (8 quads of 32
    channels, 32 rows), else one (32 channels, 8 rows)."""
    if c % 4 == 0:
        return "squeeze_excite_dw4", WIDE_GROUP[0] * WIDE_GROUP[1] // 8
    return "squeeze_excite_dw", WIDE_GROUP[1]


def depthwise_slicing(inner: int, c: int, compute_units: int) -> tuple[int, int]:
    """(slices, pixels per slice) for depthwise_kernel(c): at least a pixel per row of a
    group's items."""
    items = WIDE_GROUP[0] * WIDE_GROUP[1]
    _, rows = depthwise_kernel(c)
    blocks = -(-c // WIDE_GROUP[0])
    slices = min(
        -(-DW_GROUPS_PER_CU * compute_units // blocks),
        DW_TAIL_LOADS * items // c,
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
        slices, per_slice = depthwise_slicing(inner, c, lo.compute_units)
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
