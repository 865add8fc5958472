"""A depthwise convolution run by the 1x1 convolution that alone reads it: the GEMM
computes each depthwise output (its activation and int8 snap included) as it loads its A
tile, so the depthwise output is never stored (docs/notebook/05-*.md, "Fewer launches:
depthwise inside the pointwise GEMM"). It recomputes those outputs for every tile of output
channels, so the limits below keep it where that costs less than the launch it saves.

The chain records it as `before = [DEPTHWISE_CONV_2D]` and `input_depthwise` (and the
depthwise convolution's PAD, pad_into_reader.py, as `input_pad`). TFLite's counterpart:
`common/tasks/special/depthwise_conv_plus_1x1_conv.cc`, chosen by its special selector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....graph import Operator, Subgraph
from ..records.depthwise import fuses_into_reader
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "depthwise_into_gemm"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that computes a depthwise input, or the depthwise convolution."""
    return record.input_depthwise is not None or record.name == "DEPTHWISE_CONV_2D"


#: The most output channels of a 1x1 convolution that absorbs a stride-1 depthwise one.
#: Its GEMM computes the depthwise output again for every tile of output channels. On an
#: H100 (`bench/diag_gpu.py --only timeline`, MobileNet v1) the fused kernel beat the two
#: launches it replaces at 64-128 channels (25-30 us against 24-33) and after every
#: stride-2 depthwise (18-23 us against 22-26, 128-1024 channels), and lost at 256-1024
#: channels after a stride-1 one (36-38 us against 31-34) (docs/notebook/05-*.md, "Fewer
#: launches"; measured again: docs/notebook/07-*.md, "Depthwise-into-GEMM limit").
DEPTHWISE_MAX_READER_CHANNELS = 128
#: Off a small map, the most depthwise multiply-adds a GEMM absorbing the depthwise
#: convolution may do: its window times its outputs, times the 32-wide tiles of output
#: channels that each compute them again. Inside a persistent kernel a layer boundary
#: costs about 1.2 us, not a launch's 3-4 us, and on an H200 (bench/ab_knobs.py,
#: 2026-11-28, g) MobileNet v1 (7.2-14.5 million a GEMM) and palm_detection_lite (3.7-7.4)
#: ran faster with their depthwise convolutions apart, face_detection_short_range (at
#: most 0.9), hand_landmark_lite (3.8) and MobileNetV2 (4.1) slower
#: (docs/notebook/18-*.md, "Depthwise work inside the GEMM").
DEPTHWISE_MAX_GEMM_MACS = 5_000_000
#: On a map of at most this many pixels, a stride-1 depthwise convolution is absorbed by
#: a 1x1 convolution of up to DEPTHWISE_SMALL_MAP_CHANNELS output channels: recomputing a
#: 7x7 map's depthwise outputs per tile of channels costs less than a launch (NASNet's
#: last cells: 7x7x176; docs/notebook/12-*.md, "What changed").
DEPTHWISE_SMALL_MAP_PIXELS = 64
DEPTHWISE_SMALL_MAP_CHANNELS = 256
#: Off a small map, a depthwise convolution is absorbed only where its channels are a
#: multiple of four (the GEMM's four-wide loads and depthwise sums). On an H100 NASNet's
#: first cells (11 and 22 channels, 5x5 and 7x7 windows on 56x56 to 112x112 maps) took
#: 21-60 us per fused kernel; as two kernels, NASNetMobile ran 1.06x (fp32) and 1.09x
#: (fp16) faster (`bench/ab_trees.py`, 2026-11-28). Refusing windows over 3x3 as well
#: measured 1.08x in fp32 but 0.86x in fp16 (docs/notebook/12-*.md, "What changed").
DEPTHWISE_ALIGNED = 4


def find(scope: Scope) -> dict[int, int]:
    """Node -> the depthwise convolution producing its input, for nodes whose kernel can
    compute that input as it loads it: the depthwise output read by that node alone,
    neither leaving the partition nor absorbing anything after it."""
    found: dict[int, int] = {}
    for n in scope.nodes:
        if not scope.kernel_can(n, "input_depthwise"):
            continue
        d = scope.sole_input_producer(n, "DEPTHWISE_CONV_2D")
        if d is None or not fuses_into_reader(d, scope.sg):
            continue
        if not recomputes_too_often(d, scope.sg.operators[n], scope.sg):
            found[n] = d.index
    return found


def recomputes_too_often(depthwise: Operator, conv: Operator, sg: Subgraph) -> bool:
    """Whether fusing `depthwise` into `conv` would cost more than it saves (see
    DEPTHWISE_MAX_READER_CHANNELS, DEPTHWISE_MAX_GEMM_MACS and DEPTHWISE_SMALL_MAP_PIXELS)."""
    o = depthwise.options
    strided = o.get("stride_h", 1) > 1 or o.get("stride_w", 1) > 1
    channels = sg.tensors[conv.outputs[0]].shape[-1]
    _, h, w, c = sg.tensors[depthwise.outputs[0]].shape
    if h * w <= DEPTHWISE_SMALL_MAP_PIXELS and channels <= DEPTHWISE_SMALL_MAP_CHANNELS:
        return False
    if c % DEPTHWISE_ALIGNED:
        return True
    _, kh, kw, _ = sg.tensors[depthwise.inputs[1]].shape  # [1, kh, kw, channels]
    if kh * kw * h * w * c * -(-channels // 32) > DEPTHWISE_MAX_GEMM_MACS:
        return True
    return not strided and channels > DEPTHWISE_MAX_READER_CHANNELS
