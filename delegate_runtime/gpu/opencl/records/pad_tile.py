"""MIRROR_PAD, PADV2 and TILE: one launch each, a work item per output element
(opencl/pad_tile.cl)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.common import dequantize
from ..launch import Buf, i4, shape4
from .geometry import Shape, const_ints, shape_of
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

#: compiled only into the programs of models that carry one of these ops
KERNELS = ("pad_tile.cl",)
#: MirrorPadMode codes -> whether the edge element is repeated (0 REFLECT, 1 SYMMETRIC).
MIRROR_EDGE = {0: 0, 1: 1}


def _runtime_inputs(op: Operator, sg: Subgraph) -> int:
    return sum(1 for t in op.inputs if t >= 0 and not sg.tensors[t].is_constant)


def _one_runtime_input(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's CheckInputsOutputs(1 runtime input, 1 output): the data is the only runtime
    input (paddings and multiples constant)."""
    n = _runtime_inputs(op, sg)
    if n != 1 or op.inputs[0] < 0 or sg.tensors[op.inputs[0]].is_constant:
        return False, f"Expected 1 runtime input tensor(s), but node has {n} runtime input(s)."
    if len(op.outputs) != 1:
        return False, f"Expected 1 output tensor(s), but node has {len(op.outputs)} output(s)."
    return True, ""


def paddings(op: Operator, sg: Subgraph) -> list[tuple[int, int]]:
    """The constant paddings input as (before, after) per dimension of the input."""
    rank = len(shape_of(sg, op.inputs[0]))
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        raise ModelError("the paddings input is absent")
    pads = const_ints(sg, op.inputs[1], "paddings")
    if tuple(sg.tensors[op.inputs[1]].shape) != (rank, 2):
        raise ModelError(
            f"paddings shape {list(sg.tensors[op.inputs[1]].shape)} is not [{rank}, 2]"
        )
    if any(p < 0 for p in pads):
        raise ModelError(f"paddings {pads} must not be negative")
    return [(pads[2 * k], pads[2 * k + 1]) for k in range(rank)]


def pad_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    return [tuple(a + d + b for d, (a, b) in zip(x, paddings(op, sg), strict=True))]


def tile_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    multiples = const_ints(sg, op.inputs[1], "multiples")
    if len(multiples) != len(x) or any(m < 0 for m in multiples):
        raise ModelError(f"multiples {multiples} do not fit rank {len(x)}")
    return [tuple(d * m for d, m in zip(x, multiples, strict=True))]


def check_mirror_pad(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's conditions (one runtime input, constant paddings) with more taken: SYMMETRIC
    as well as REFLECT, and inputs of rank 1 to 4 (LiteRT: 3 or 4). Paddings must fit one
    mirror, as TFLite's kernel requires (at most size - 1 for REFLECT, size for
    SYMMETRIC)."""
    mode = int(op.options.get("mode", 0))
    if mode not in MIRROR_EDGE:
        return False, (
            f"Only Reflective padding is supported for Mirror Pad operation. But node has {mode}"
        )
    ok, why = _one_runtime_input(op, sg)
    if not ok:
        return ok, why
    try:
        pads = paddings(op, sg)
    except ModelError as exc:
        return False, f"Invalid paddings: {exc}."
    x = shape_of(sg, op.inputs[0])
    limit = 1 - MIRROR_EDGE[mode]
    if any(max(a, b) > d - limit for d, (a, b) in zip(x, pads, strict=True)):
        return False, f"Paddings {pads} do not fit one mirror of the input {list(x)}."
    return True, ""


def check_padv2(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """Constant paddings and pad value (LiteRT's one runtime input), inputs of rank 1 to 4
    (LiteRT: 3 or 4); no value input pads with zero."""
    if len(op.inputs) not in (2, 3):
        return False, f"Expected 2 or 3 inputs, got {len(op.inputs)}."
    ok, why = _one_runtime_input(op, sg)
    if not ok:
        return ok, why
    if len(op.inputs) == 3 and op.inputs[2] >= 0 and sg.tensors[op.inputs[2]].size != 1:
        return False, "The pad value must be a scalar."
    try:
        paddings(op, sg)
    except ModelError as exc:
        return False, f"Invalid paddings: {exc}."
    return True, ""


def check_tile(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's: one runtime input (the multiples constant), one output; any rank to 4."""
    if len(op.inputs) != 2:
        return False, f"Expected 2 inputs, got {len(op.inputs)}."
    return _one_runtime_input(op, sg)


def _pad_value(lo: Lowering, op: Operator) -> np.ndarray:
    """PADV2's value as float: a quantized model's raw value is written into the output as
    it is (TFLite), so it means what it means on the output's grid; no value input: 0."""
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return np.zeros(1, np.float32)
    value = np.asarray(lo.t(op.inputs[2]).data).reshape(1)
    out = lo.t(op.outputs[0])
    if value.dtype.kind in "iu" and out.quantization is not None:
        return dequantize(value, out.quantization).astype(np.float32)
    return value.astype(np.float32)


def _pad_geometry(lo: Lowering, op: Operator) -> list[np.ndarray]:
    x, out = op.inputs[0], op.outputs[0]
    rank = len(lo.t(x).shape)
    before = [0] * (4 - rank) + [a for a, _ in paddings(op, lo.sg)]
    return [i4(shape4(lo.t(x).shape)), i4(shape4(lo.t(out).shape)), i4(before)]


def lower_padv2(lo: Lowering, op: Operator) -> None:
    out = op.outputs[0]
    value = lo.add_const(f"pad_value{op.index}", _pad_value(lo, op))
    args = [Buf(op.inputs[0]), Buf(out), value, *_pad_geometry(lo, op)]
    lo.emit_1d(op, "pad_constant4d", args, lo.t(out).size)


def lower_mirror_pad(lo: Lowering, op: Operator) -> None:
    out = op.outputs[0]
    edge = np.int32(MIRROR_EDGE[int(op.options.get("mode", 0))])
    args = [Buf(op.inputs[0]), Buf(out), *_pad_geometry(lo, op), edge]
    lo.emit_1d(op, "mirror_pad4d", args, lo.t(out).size)


def lower_tile(lo: Lowering, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    args = [Buf(x), Buf(out), i4(shape4(lo.t(x).shape)), i4(shape4(lo.t(out).shape))]
    lo.emit_1d(op, "tile4d", args, lo.t(out).size)


register(
    # LiteRT's PadOperationParser: versions 1 and 2 (float, int8)
    GpuOp(
        "MIRROR_PAD",
        OpRule(versions(1), versions(2)),
        lower_mirror_pad,
        KERNELS,
        check_mirror_pad,
        pad_shapes,
        launches=("mirror_pad4d",),
        family="movement",
        on_demand=KERNELS,
    ),
    GpuOp(
        "PADV2",
        OpRule(versions(1), versions(2)),
        lower_padv2,
        KERNELS,
        check_padv2,
        pad_shapes,
        launches=("pad_constant4d",),
        family="movement",
        on_demand=KERNELS,
    ),
    # LiteRT checks no TILE version: every one (3: int8; 2, strings, fails the type rule)
    GpuOp(
        "TILE",
        OpRule(versions(1), versions(3)),
        lower_tile,
        KERNELS,
        check_tile,
        tile_shapes,
        launches=("tile4d",),
        family="movement",
        on_demand=KERNELS,
    ),
)
