"""A PAD of the height and width run by the kernel reading its output: the kernel reads
the zero rows and columns itself, so the padded map is never stored.

The chain records it as `before = [PAD]` and `input_pad`; where the reader is a depthwise
convolution that a GEMM computes (depthwise_into_gemm.py), the GEMM's chain takes the PAD
too. TFLite's counterpart: `common/transformations/merge_padding_with.cc`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....graph import Subgraph
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "pad_into_reader"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that reads zero padding itself, or the PAD."""
    return record.input_pad is not None or record.name == "PAD"


#: (the PAD's input, top, left zero rows): Chain.input_pad
Padded = tuple[int, int, int]


def find(scope: Scope) -> dict[int, tuple[int, Padded]]:
    """Node -> (the PAD before it, Padded) for nodes whose kernel can read zero padding
    itself: a PAD of H and W only, read only by that node."""
    sg = scope.sg
    found: dict[int, tuple[int, Padded]] = {}
    for n in scope.nodes:
        if not scope.kernel_can(n, "input_pad"):
            continue
        p = scope.sole_input_producer(n, "PAD")
        if p is None:
            continue
        pad, y = p.index, p.outputs[0]
        amounts = sg.tensors[p.inputs[1]].data if len(p.inputs) > 1 else None
        if (
            amounts is None
            or len(sg.tensors[y].shape) != 4
            or np.asarray(amounts).shape != (4, 2)
            or np.asarray(amounts)[[0, 3]].any()
            or (np.asarray(amounts) < 0).any()
            or _padded_zero_is_not_zero(sg, y)
        ):
            continue
        a = np.asarray(amounts)
        found[n] = (pad, (p.inputs[0], int(a[1, 0]), int(a[2, 0])))
    return found


def _padded_zero_is_not_zero(sg: Subgraph, t: int) -> bool:
    """A quantized PAD pads with the zero point, which is 0.0 in the float view; nothing
    else to check, but the float view needs the tensor per-tensor quantized or float."""
    q = sg.tensors[t].quantization
    return q is not None and q.per_channel
