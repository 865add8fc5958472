"""A depthwise convolution run by the 1x1 convolution that alone reads it: the GEMM
computes each depthwise output (its activation and int8 snap included) as it loads its A
tile, so the depthwise output is never stored (docs/notebook/05-*.md, "Fewer launches:
depthwise inside the pointwise GEMM"). It recomputes those outputs for every tile of output
channels, so the session's switches (depthwise_* in gpu/switches.py, with their
measurements) keep it where that costs less than the launch it saves.

The chain records it as `before = [DEPTHWISE_CONV_2D]` and `input_depthwise` (and the
depthwise convolution's PAD, pad_into_reader.py, as `input_pad`). TFLite's counterpart:
`common/tasks/special/depthwise_conv_plus_1x1_conv.cc`, chosen by its special selector.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....graph import Operator, Subgraph
from ...switches import Switches
from ..records.depthwise import fuses_into_reader
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "depthwise_into_gemm"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that computes a depthwise input, or the depthwise convolution."""
    return record.input_depthwise is not None or record.name == "DEPTHWISE_CONV_2D"


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
        if not recomputes_too_often(d, scope.sg.operators[n], scope.sg, scope.switches):
            found[n] = d.index
    return found


def recomputes_too_often(
    depthwise: Operator, conv: Operator, sg: Subgraph, switches: Switches
) -> bool:
    """Whether fusing `depthwise` into `conv` would cost more than it saves, by the
    switches' depthwise_* limits: a small map's, the channels' alignment, the multiply-adds
    the GEMM recomputes and the reader's channels after a stride-1 depthwise."""
    o = depthwise.options
    strided = o.get("stride_h", 1) > 1 or o.get("stride_w", 1) > 1
    channels = sg.tensors[conv.outputs[0]].shape[-1]
    _, h, w, c = sg.tensors[depthwise.outputs[0]].shape
    small_map = h * w <= switches.depthwise_small_map_pixels
    if small_map and channels <= switches.depthwise_small_map_channels:
        return False
    if c % switches.depthwise_aligned:
        return True
    _, kh, kw, _ = sg.tensors[depthwise.inputs[1]].shape  # [1, kh, kw, channels]
    if kh * kw * h * w * c * -(-channels // 32) > switches.depthwise_max_gemm_macs:
        return True
    return not strided and channels > switches.depthwise_max_reader_channels
