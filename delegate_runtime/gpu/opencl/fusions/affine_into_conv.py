"""A BatchNormalization and its clamping activation before a 1x1 convolution (MUL and
ADD of per-channel constants, DenseNet's and ResNetV2's pre-activation blocks) run by that
convolution: its GEMM computes clamp(x * scale + shift) on each value it loads
(docs/notebook/11-*.md, "A BatchNormalization before a 1x1 convolution").

The chain records it as `before = [MUL, ADD]` and `input_affine`. TFLite's
`common/transformations/fuse_mul_to_conv.cc` and `fuse_add_to_conv.cc` fold such
constants into the convolution's weights where nothing lies between; the activation
between the ADD and the convolution prevents that, so here the kernel applies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .scope import Scope, channel_constant, other_input, plain_float

if TYPE_CHECKING:
    from ..records import GpuOp

NAME = "affine_into_conv"


def involves(record: GpuOp) -> bool:
    """Whether `record`'s op takes part in this fusion:
    a kernel that scales its input, or the MUL and ADD it absorbs."""
    return record.input_scale is not None or record.name in ("MUL", "ADD")


#: TFLite fused activation -> the clamp an affine input applies (NONE, RELU, RELU_N1_TO_1,
#: RELU6)
CLAMPS = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}

#: (x, scale, shift, clamp low, clamp high): Chain.input_affine
Affine = tuple[int, int, int, float, float]


def find(scope: Scope) -> dict[int, tuple[int, int, Affine]]:
    """Node -> (MUL, ADD, Affine) for nodes whose kernel can scale their input and read
    it as clamp(x * scale + shift): MUL(x, per-channel constant) read only by
    ADD(per-channel constant), with a clamping activation or none, read only by the node;
    float tensors only (a quantized model snaps between them)."""
    sg, readers, produced_by = scope.sg, scope.readers, scope.produced_by
    found = {}
    for n in scope.nodes:
        if not scope.kernel_can(n, "input_scale"):
            continue
        add = scope.sole_input_producer(n, "ADD")
        act = add.options.get("fused_activation_function", 0) if add is not None else None
        if act not in CLAMPS:
            continue
        shift = channel_constant(sg, add)
        mul = produced_by.get(other_input(add, shift)) if shift is not None else None
        if mul is None or mul not in scope.inside or sg.operators[mul].op != "MUL":
            continue
        m = sg.operators[mul]
        scale = channel_constant(sg, m)
        y = m.outputs[0]
        if scale is None or m.options.get("fused_activation_function", 0):
            continue
        if readers.get(y) != [add.index] or y in scope.leaving or y in sg.outputs:
            continue
        x = other_input(m, scale)
        if len(sg.tensors[x].shape) != 4 or not plain_float(sg, (x, y, add.outputs[0])):
            continue
        found[n] = (mul, add.index, (x, scale, shift, *CLAMPS[act]))
    return found
