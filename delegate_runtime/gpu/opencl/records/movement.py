"""Data movement: RESHAPE (a shared buffer), CONCATENATION (a strided copy per input) and
the index-map ops (TRANSPOSE, slices, PAD, space/depth), run as a 4-D strided copy when
their map is affine, else a gather by a constant index buffer."""

from __future__ import annotations

import copy

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.registry import OpContext, lookup
from ..launch import Buf, Const, contiguous_strides, i4, shape4
from .geometry import Shape, shape_of
from .record import GpuOp, OpRule, register, versions
from .shape_inputs import constant_shape_inputs

KERNELS = ("movement.cl",)


def reshape_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """The shape input when it is a vector, else the new_shape option; one -1 resolved."""
    x = shape_of(sg, op.inputs[0])
    size = int(np.prod(x, dtype=np.int64))
    given = sg.tensors[op.inputs[1]] if len(op.inputs) > 1 and op.inputs[1] >= 0 else None
    if given is not None and len(given.shape) == 1 and given.data is not None:
        target = [int(v) for v in np.asarray(given.data).reshape(-1)]
    else:
        target = list(op.options.get("new_shape", None) or [])
        target = [] if target == [0] else target  # legacy models write a scalar as [0]
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ModelError(f"shape {target} is not a shape")
    if -1 in target and known:
        target = [size // known if d == -1 else d for d in target]
    if int(np.prod(target, dtype=np.int64)) != size:
        raise ModelError(f"cannot reshape {list(x)} into {target}")
    return [tuple(target)]


def concatenation_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    shapes = [shape_of(sg, t) for t in op.inputs]
    rank = len(shapes[0])
    axis = op.options.get("axis", 0)
    if not -rank <= axis < rank:
        raise ModelError(f"axis {axis} out of range for rank {rank}")
    axis %= rank
    rest = {s[:axis] + s[axis + 1 :] for s in shapes}
    if len(rest) != 1 or any(len(s) != rank for s in shapes):
        raise ModelError(f"inputs {[list(s) for s in shapes]} do not concatenate on axis {axis}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


def index_map_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """The reference kernel's output shape, run on a zero-filled view of the input."""
    return [_reference_on(sg, op, np.broadcast_to(np.int32(0), shape_of(sg, op.inputs[0]))).shape]


def lower_reshape(lo, op: Operator) -> None:
    lo.out.alias[op.outputs[0]] = op.inputs[0]


def lower_concatenation(lo, op: Operator) -> None:
    """A strided copy per input, except for the inputs already in place: written into
    their slot by the kernel making them, or concatenations living in this output's
    buffer (opencl/concat_views.py)."""
    out = op.outputs[0]
    out_shape = lo.t(out).shape
    axis = op.options.get("axis", 0) % len(out_shape) + (4 - len(out_shape))
    out4 = shape4(out_shape)
    ostr = contiguous_strides(out4)
    view = lo.view(out) if op.index in lo.views.concats else None
    base = 0
    if view is not None:  # strides and offsets in the root's pixels
        ostr, base = list(view.strides4(out4)), view.offset
    offset = 0
    for i in op.inputs:
        s4 = shape4(lo.t(i).shape)
        if op.index in lo.views.concats and lo.view(i) is not None:
            offset += s4[axis]
            continue  # already where it belongs
        lo.emit_1d(
            op,
            "copy4d",
            [
                lo.operand(i),
                Buf(out),
                i4(s4),
                i4(contiguous_strides(s4)),
                np.int32(0),
                i4(ostr),
                np.int32(base + offset * ostr[axis]),
            ],
            int(np.prod(s4)),
        )
        offset += s4[axis]
    lo.activation(op, out)


def lower_index_map(lo, op: Operator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    idx = _reference_on_indices(lo.sg, op)
    n = idx.size
    affine = _affine4(idx)
    if affine is not None:
        offset, strides, shape = affine
        lo.emit_1d(
            op,
            "copy4d",
            [
                Buf(x),
                Buf(out),
                i4(shape),
                i4(strides),
                np.int32(offset),
                i4(contiguous_strides(shape)),
                np.int32(0),
            ],
            n,
        )
    else:
        key = f"idx{op.index}"
        lo.out.consts[key] = np.ascontiguousarray(idx.reshape(-1).astype(np.int32))
        lo.emit_1d(op, "gather_index", [Buf(x), Buf(out), Const(key), np.int32(n)], n)


def _reference_on_indices(sg: Subgraph, op: Operator) -> np.ndarray:
    """The op's reference kernel run on element numbers: where each output comes from
    (-1 for padding)."""
    shape = sg.tensors[op.inputs[0]].shape
    ids = np.arange(1, int(np.prod(shape, dtype=np.int64)) + 1, dtype=np.int32).reshape(shape)
    return np.asarray(_reference_on(sg, op, ids), np.int64) - 1  # padding (0) becomes -1


def _reference_on(sg: Subgraph, op: Operator, ids: np.ndarray) -> np.ndarray:
    """The op's reference kernel run on int32 values `ids` in place of its input."""
    x = op.inputs[0]
    kernel, why = lookup(op.op, op.version)
    if kernel is None:
        raise ModelError(f"{op.describe()}: {why}")
    fake = copy.copy(sg.tensors[x])
    fake.dtype, fake.quantization, fake.data = np.dtype(np.int32), None, None
    ins = [ids] + [sg.tensors[i].data if i >= 0 else None for i in op.inputs[1:]]
    tensors = [fake] + [sg.tensors[i] if i >= 0 else None for i in op.inputs[1:]]
    outs = [copy.copy(sg.tensors[o]) for o in op.outputs]
    for o in outs:
        o.dtype, o.quantization = np.dtype(np.int32), None
    ctx = OpContext(
        op=op, inputs=ins, in_tensors=tensors, out_tensors=outs, run_subgraph=lambda *_: []
    )
    result = kernel.fn(ctx)
    return result if isinstance(result, np.ndarray) else result[0]


def _affine4(idx: np.ndarray) -> tuple[int, list[int], tuple[int, int, int, int]] | None:
    """(offset, strides, shape) when idx[d] == offset + d . strides over a 4-D view."""
    if idx.ndim > 4 or idx.size == 0 or idx.min() < 0:
        return None
    v = idx.reshape(shape4(idx.shape))
    offset = int(v[0, 0, 0, 0])
    strides = []
    for k in range(4):
        if v.shape[k] > 1:
            step = [0, 0, 0, 0]
            step[k] = 1
            strides.append(int(v[tuple(step)]) - offset)
        else:
            strides.append(0)
    grids = np.indices(v.shape, dtype=np.int64)
    expect = offset + sum(grids[k] * strides[k] for k in range(4))
    if not np.array_equal(expect, v):
        return None
    return offset, strides, v.shape


def check_strided_slice(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    ok, why = constant_shape_inputs(op, sg)
    if ok and (op.options.get("ellipsis_mask") or op.options.get("new_axis_mask")):
        return False, "Ellipsis and new_axis masks are not supported."
    return ok, why


def index_map(name: str, rule: OpRule, check=constant_shape_inputs) -> GpuOp:
    return GpuOp(
        name,
        rule,
        lower_index_map,
        KERNELS,
        check,
        index_map_shapes,
        launches=("copy4d", "gather_index"),
        family="movement",
    )


V1_2 = OpRule(versions(1), versions(2))
register(
    GpuOp(
        "RESHAPE",
        OpRule(versions(1), versions(1)),
        lower_reshape,
        (),
        constant_shape_inputs,
        reshape_shapes,
        launches=(),
        family="movement",
    ),
    GpuOp(
        "CONCATENATION",
        V1_2,
        lower_concatenation,
        ("movement.cl", "elementwise.cl"),
        shapes=concatenation_shapes,
        launches=("copy4d", "unary"),
        family="movement",
    ),
    index_map("TRANSPOSE", V1_2),
    index_map("STRIDED_SLICE", OpRule(versions(1), versions(4)), check_strided_slice),
    index_map("SLICE", V1_2),
    index_map("SPACE_TO_DEPTH", V1_2),
    index_map("DEPTH_TO_SPACE", V1_2),
    index_map("PAD", V1_2),
)
