"""A squeeze-excite gate (MUL of a feature map by a per-channel vector) run by the 1x1
convolution reading the product: its GEMM scales each input channel as it loads it (and,
in an int8 model, snaps the product to the MUL output's grid), so the product is never
stored (docs/notebook/05-*.md, "An int8 squeeze-excite gate inside the projection's
GEMM").

The chain records it as `before = [MUL]` and `input_scale`. TFLite's counterpart,
`common/transformations/fuse_mul_to_conv.cc` (NewMergeMulWithConvolution), folds a MUL by
constants into the weights; a gate is computed at run time, so here the kernel applies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records.steps import qdq_step
from .scope import Scope

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "gate_into_conv"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that scales its input, or the gate MUL."""
    return record.input_scale is not None or record.name == "MUL"


#: (feature map, gate, QDQ params of the product or None): Chain.input_scale
Gate = tuple[int, int, tuple[float, float, float, float] | None]


def find(scope: Scope) -> dict[int, tuple[int, Gate]]:
    """Node -> (the gate MUL before it, its Gate) for nodes whose kernel can scale their
    input: MUL(x, gate) of batch 1, gate one value per channel, read only by that node,
    with no activation of its own."""
    sg = scope.sg
    found: dict[int, tuple[int, Gate]] = {}
    for n in scope.nodes:
        if not scope.kernel_can(n, "input_scale"):
            continue
        m = scope.sole_input_producer(n, "MUL")
        if m is None or m.options.get("fused_activation_function", 0) or len(set(m.inputs)) != 2:
            continue
        mul, y = m.index, m.outputs[0]
        shape = sg.tensors[y].shape
        for x, gate in (m.inputs, m.inputs[::-1]):
            g = sg.tensors[gate]
            if (
                sg.tensors[x].shape == shape
                and len(shape) == 4
                and shape[0] == 1
                and g.size == shape[-1]
                and g.shape[-1] == shape[-1]
                and tuple(g.shape) != tuple(shape)  # broadcast over pixels
            ):
                snap = qdq_step(sg, y)
                found[n] = (mul, (x, gate, snap[0].params if snap else None))
                break
    return found
