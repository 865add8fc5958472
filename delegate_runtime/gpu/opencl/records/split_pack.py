"""PACK, UNPACK, SPLIT and SPLIT_V: a strided block copy (movement.cl's `copy4d`) per
input packed or per output split, along any axis of tensors up to 4-D.

Each copy sees its source and destination as [outer, axis, inner] (outer: the dimensions
before the axis, inner: those after it) and moves a run of the axis from one to the
other."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf, i4
from .geometry import Shape, const_ints, shape_of
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

KERNELS = ("movement.cl",)
#: What each record here launches, and its family.
COPY = {"launches": ("copy4d",), "family": "movement"}


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ModelError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def _outer_inner(shape: Shape, axis: int) -> tuple[int, int]:
    return int(np.prod(shape[:axis], dtype=np.int64)), int(
        np.prod(shape[axis + 1 :], dtype=np.int64)
    )


def _const_axis(sg: Subgraph, t: int) -> int:
    values = const_ints(sg, t, "axis")
    if len(values) != 1:
        raise ModelError(f"axis {values} must hold one value")
    return values[0]


# -- shapes -----------------------------------------------------------------------------------


def pack_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    shapes = {shape_of(sg, t) for t in op.inputs}
    if len(shapes) != 1:
        raise ModelError(f"inputs {[list(s) for s in shapes]} differ in shape")
    x = shapes.pop()
    axis = _axis(int(op.options.get("axis", 0)), len(x) + 1)
    return [(*x[:axis], len(op.inputs), *x[axis:])]


def unpack_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    axis = _axis(int(op.options.get("axis", 0)), len(x))
    num = int(op.options.get("num", 0)) or x[axis]
    if num != x[axis]:
        raise ModelError(f"num {num} is not the size {x[axis]} of axis {axis}")
    return [x[:axis] + x[axis + 1 :]] * num


def _split_sizes(op: Operator, sg: Subgraph) -> tuple[Shape, int, list[int]]:
    """(input shape, axis, size of each part along it) of SPLIT or SPLIT_V."""
    if op.op == "SPLIT":
        x = shape_of(sg, op.inputs[1])
        axis = _axis(_const_axis(sg, op.inputs[0]), len(x))
        parts = int(op.options.get("num_splits", 0)) or len(op.outputs)
        if parts <= 0 or x[axis] % parts:
            raise ModelError(f"axis size {x[axis]} does not split into {parts} equal parts")
        return x, axis, [x[axis] // parts] * parts
    x = shape_of(sg, op.inputs[0])
    axis = _axis(_const_axis(sg, op.inputs[2]), len(x))
    sizes = const_ints(sg, op.inputs[1], "size_splits")
    if sizes.count(-1) > 1:
        raise ModelError(f"size_splits {sizes} hold more than one -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x[axis] - (sum(sizes) + 1)
    if sum(sizes) != x[axis] or any(s < 0 for s in sizes):
        raise ModelError(f"size_splits {sizes} do not add up to axis size {x[axis]}")
    return x, axis, sizes


def split_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x, axis, sizes = _split_sizes(op, sg)
    return [(*x[:axis], s, *x[axis + 1 :]) for s in sizes]


# -- checks -----------------------------------------------------------------------------------


def check_split(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT checks nothing but reads the axis (and SPLIT_V's sizes) as constants, so they
    must be; any axis, any number of outputs."""
    shape_like = [op.inputs[0]] if op.op == "SPLIT" else list(op.inputs[1:3])
    if any(t < 0 or not sg.tensors[t].is_constant for t in shape_like):
        return False, "Shape-like inputs must be constant."
    return True, ""


# -- lowering ---------------------------------------------------------------------------------


def _copy_run(
    lo: Lowering,
    op: Operator,
    src: int,
    dst: int,
    outer: int,
    inner: int,
    run: int,
    src_axis: tuple[int, int],
    dst_axis: tuple[int, int],
) -> None:
    """Copy `run` positions of the axis: from src seen as [outer, src_axis[0], inner] at
    position src_axis[1] to dst seen as [outer, dst_axis[0], inner] at dst_axis[1]."""
    (src_len, src_at), (dst_len, dst_at) = src_axis, dst_axis
    shape = (1, outer, run, inner)
    lo.emit_1d(
        op,
        "copy4d",
        [
            lo.operand(src),
            Buf(dst),
            i4(shape),
            i4((0, src_len * inner, inner, 1)),
            np.int32(src_at * inner),
            i4((0, dst_len * inner, inner, 1)),
            np.int32(dst_at * inner),
        ],
        outer * run * inner,
    )


def lower_pack(lo: Lowering, op: Operator) -> None:
    out = op.outputs[0]
    out_shape = tuple(lo.t(out).shape)
    axis = _axis(int(op.options.get("axis", 0)), len(out_shape))
    outer, inner = _outer_inner(out_shape, axis)
    n = len(op.inputs)
    for k, t in enumerate(op.inputs):
        _copy_run(lo, op, t, out, outer, inner, 1, (1, 0), (n, k))


def lower_unpack(lo: Lowering, op: Operator) -> None:
    x = op.inputs[0]
    shape = tuple(lo.t(x).shape)
    axis = _axis(int(op.options.get("axis", 0)), len(shape))
    outer, inner = _outer_inner(shape, axis)
    for k, out in enumerate(op.outputs):
        _copy_run(lo, op, x, out, outer, inner, 1, (shape[axis], k), (1, 0))


def lower_split(lo: Lowering, op: Operator) -> None:
    x = op.inputs[1] if op.op == "SPLIT" else op.inputs[0]
    shape, axis, sizes = _split_sizes(op, lo.sg)
    outer, inner = _outer_inner(shape, axis)
    at = 0
    for out, size in zip(op.outputs, sizes, strict=True):
        _copy_run(lo, op, x, out, outer, inner, size, (shape[axis], at), (size, 0))
        at += size


register(
    # LiteRT checks no version of these: every one the schema has (past float and int8
    # they are other types, which the type rule refuses)
    GpuOp(
        "PACK", OpRule(versions(5), versions(5)), lower_pack, KERNELS, shapes=pack_shapes, **COPY
    ),
    GpuOp(
        "UNPACK",
        OpRule(versions(6), versions(6)),
        lower_unpack,
        KERNELS,
        shapes=unpack_shapes,
        **COPY,
    ),
    GpuOp(
        "SPLIT",
        OpRule(versions(5), versions(5)),
        lower_split,
        KERNELS,
        check_split,
        split_shapes,
        **COPY,
    ),
    GpuOp(
        "SPLIT_V",
        OpRule(versions(3), versions(3)),
        lower_split,
        KERNELS,
        check_split,
        split_shapes,
        **COPY,
    ),
)
