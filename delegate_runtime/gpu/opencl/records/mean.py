"""MEAN over adjacent axes: the input seen as [outer, inner, rest]."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf, Counters, Scratch, grid3, shape4
from .geometry import Shape, const_ints, shape_of
from .record import GpuOp, OpRule, register, versions
from .shape_inputs import constant_shape_inputs

#: mean_axis_wide's work group: 32 outputs x MEAN_ROWS rows (mean.cl).
WIDE_GROUP = (32, 8, 1)
#: Elements of inner per work group, at least; and the most groups sharing one output.
SLICE, MAX_SLICES = 256, 64


def _axes(op: Operator, sg: Subgraph) -> list[int]:
    rank = max(len(sg.tensors[op.inputs[0]].shape), 1)
    return sorted({int(a) % rank for a in np.atleast_1d(sg.tensors[op.inputs[1]].data)})


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    ok, why = constant_shape_inputs(op, sg)
    if not ok:
        return ok, why
    axes = _axes(op, sg)
    if not axes or axes != list(range(axes[0], axes[-1] + 1)):
        return False, f"MEAN over non-adjacent axes {axes} is not supported."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    axes = const_ints(sg, op.inputs[1], "axis")
    if any(not -len(x) <= a < len(x) for a in axes):
        raise ModelError(f"axes {axes} out of range for rank {len(x)}")
    reduced = {a % len(x) for a in axes}
    if op.options.get("keep_dims", False):
        return [tuple(1 if i in reduced else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in reduced)]


def lower(lo, op: Operator) -> None:
    shape = lo.t(op.inputs[0]).shape
    axes = _axes(op, lo.sg)
    if axes != list(range(axes[0], axes[-1] + 1)):
        raise ModelError(f"{op.describe()}: MEAN over non-adjacent axes {axes} on the GPU")
    outer = int(np.prod(shape[: axes[0]], dtype=np.int64))
    inner = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    rest = int(np.prod(shape[axes[-1] + 1 :], dtype=np.int64))
    reduce_mean(lo, op, (outer, inner, rest), lo.epilogue(0))


def prologue_args(lo, op: Operator, channels: int) -> tuple[Buf, np.ndarray]:
    """What a GEMM reading this MEAN's output needs to compute it as it loads it instead:
    the MEAN's input and gemm.cl.in's mgeo (pixels per image, channels)."""
    source = op.inputs[0]
    _, h, w, _ = shape4(lo.t(source).shape)
    return Buf(source), np.array([h * w, channels], np.int32)


def slicing(inner: int) -> tuple[int, int]:
    """How many work groups share each output of a mean over `inner` elements, and how
    many elements each sums."""
    slices = max(min(inner // SLICE, MAX_SLICES), 1)
    return slices, -(-inner // slices)


def reduce_mean(lo, op: Operator, dims: tuple[int, int, int], epilogue: list[Any]) -> None:
    """Launch the mean of `op`'s input 0 seen as `dims` = [outer, inner, rest] over inner
    into its output 0 [outer, rest], through `epilogue` (Lowerer.epilogue's arguments; an
    element's channel is its index in the output's last axis); shared with the whole-map
    AVERAGE_POOL_2D."""
    outer, inner, rest = dims
    out_shape = lo.t(op.outputs[0]).shape
    channels = max(int(out_shape[-1]), 1) if len(out_shape) else 1
    args = [Buf(op.inputs[0]), Buf(op.outputs[0]), *map(np.int32, (*dims, channels))]
    if inner >= lo.switches.mean_wide_from:  # a work group shares each output
        slices, per_slice = slicing(inner)
        blocks = -(-rest // WIDE_GROUP[0])
        scratch = Scratch(4 * outer * slices * rest)
        args += [np.int32(per_slice), scratch, Counters(blocks * outer), *epilogue]
        gsize = (blocks * WIDE_GROUP[0], slices * WIDE_GROUP[1], outer)
        lo.emit(op, "mean_axis_wide", args, gsize, WIDE_GROUP)
        return
    g, lsz = grid3(rest, outer, 1)
    lo.emit(op, "mean_axis", [*args, *epilogue], g[:2], lsz[:2])


register(
    GpuOp(
        "MEAN",
        OpRule(versions(1), versions(2)),
        lower,
        ("mean.cl", "depthwise_at.cl", "squeeze_excite.cl"),
        check,
        shapes,
        epilogue=True,
        launches=("mean_axis", "mean_axis_wide"),
        family="reduction",
    )
)
