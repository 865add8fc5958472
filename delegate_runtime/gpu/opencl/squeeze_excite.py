"""Squeeze-and-excite as one launch: MEAN over the pixels (or an average pool over the whole
map, with its activation), then the two 1x1 convolutions on that one pixel, each with the
elementwise nodes fused into it (squeeze_excite.cl).

opencl/fusion.py finds the pattern (a MEAN chain whose `then` holds the two convolutions'
chains); here it is lowered. The mean and the hidden vector stay in the kernel's local
memory; only the second convolution's result (the gate) is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...graph import Operator
from ..records.conv import gemm_weights
from ..records.mean import WIDE_GROUP, slicing
from .launch import Buf, Counters, Scratch, shape4

if TYPE_CHECKING:
    from .fusion import Chain
    from .lowering import Lowerer

#: The most channels the kernel takes, in, hidden and out (SE_MAX in the kernel).
MAX_CHANNELS = 2048
#: The most weights of the two convolutions together. One work group computes them, so
#: its time grows with them; on an H200 (`bench/diag_gpu.py --only timeline`, fp32) the
#: kernel took 11-13 us up to 4,800 weights, 16-18 us at 19,200, 20-27 us at 37,632 and
#: 41,472, against about 30 us for the three launches it replaces (MEAN, two GEMMs), but
#: 42-50 us at 110,592 (EfficientNetB0's last blocks) and 56-58 us at 165,888
#: (MobileNetV3Small's).
MAX_WEIGHTS = 50_000


def lower(lo: Lowerer, mean: Operator, chain: Chain) -> None:
    """The launch of a MEAN chain with `then` = (first, second convolution's chains)."""
    first, second = chain.then
    conv1, conv2 = lo.sg.operators[first.producer], lo.sg.operators[second.producer]
    x = mean.inputs[0]
    _, h, w, c = shape4(lo.t(x).shape)
    inner = h * w
    slices, per_slice = slicing(inner)
    w1, b1, r = gemm_weights(lo, conv1)
    w2, b2, n = gemm_weights(lo, conv2)
    epilogues: list[Any] = []
    for steps, op in ((chain.steps, mean), (first.steps, conv1), (second.steps, conv2)):
        lo.steps = steps
        epilogues += lo.epilogue(op.options.get("fused_activation_function", 0))
    lo.steps = chain.steps
    args = [Buf(x), Buf(second.output), *map(np.int32, (inner, c, per_slice))]
    args += [Scratch(4 * slices * c), Counters(1), w1, b1, np.int32(r), w2, b2, np.int32(n)]
    blocks = -(-c // WIDE_GROUP[0])
    gsize = (blocks * WIDE_GROUP[0], slices * WIDE_GROUP[1])
    lo.emit(mean, "squeeze_excite", args + epilogues, gsize, WIDE_GROUP[:2])
