"""GATHER (1-D int32 indices, constant or runtime, any axis) and ONE_HOT
(opencl/gather.cl).

Runtime int32 indices are held as float values on the GPU (records/record.py's
`int32_tensors`): exact up to 2^24 in fp32 storage, up to 2048 in fp16 storage, so with
fp16 storage an axis longer than 2048 (or a one-hot depth past it) may read a neighbour of
the index given. Constant GATHER indices stay int32."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ..launch import Buf
from .geometry import Shape, const_ints, shape_of
from .record import GpuOp, OpRule, register, versions

if TYPE_CHECKING:
    from ..lowering_api import Lowering

#: compiled only into the programs of models that carry one of these ops
KERNELS = ("gather.cl",)
#: LiteRT's refusal of a tensor type (model_builder.cc's IsAllAllowedTensors).
TYPE_SHAPE = "OP is supported, but tensor type/shape isn't compatible."
#: TFLite's refusal of ONE_HOT, in its words (gpu_compat.cc's CheckOneHot...).
ONE_HOT_REFUSED = (
    "Indices must be int32 type, on/off tensors must be constant, scalar, float type, "
    "axis must be -1 or last dim"
)
FLOATS = (np.float32, np.float16)


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ModelError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


# -- GATHER -----------------------------------------------------------------------------------


def gather_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    params, indices = shape_of(sg, op.inputs[0]), shape_of(sg, op.inputs[1])
    axis = _axis(int(op.options.get("axis", 0)), len(params))
    return [params[:axis] + indices + params[axis + 1 :]]


def check_gather(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's conditions: two inputs, at most one of them constant (either: a constant
    table read at runtime indices, or runtime params at constant indices), 1-D int32
    indices, any axis; the params and output float (int32 ones are TFLite's type
    refusal)."""
    if len(op.inputs) != 2 or len(op.outputs) != 1 or min(op.inputs) < 0:
        return False, "Op can only handle 1 or 2 operand(s)."
    if all(sg.tensors[t].is_constant for t in op.inputs):
        return False, "Op can only handle 1 or 2 operand(s)."
    indices = sg.tensors[op.inputs[1]]
    if len(indices.shape) != 1:
        return False, "Only support 1D indices"
    if indices.dtype != np.int32:
        return False, "Only accept INT32 indices"
    if int(op.options.get("batch_dims", 0)) != 0:
        return False, "Only support 1D indices"  # batch_dims needs indices of rank > 1
    params, out = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if params.dtype not in FLOATS and params.quantization is None:
        return False, TYPE_SHAPE
    if out.dtype not in FLOATS and out.quantization is None:
        return False, TYPE_SHAPE
    return True, ""


def lower_gather(lo: Lowering, op: Operator) -> None:
    params, indices = op.inputs[:2]
    out = op.outputs[0]
    shape = tuple(lo.t(params).shape)
    axis = _axis(int(op.options.get("axis", 0)), len(shape))
    inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    n = lo.t(indices).size
    total = lo.t(out).size
    if lo.t(indices).is_constant:
        idx = np.asarray(lo.t(indices).data, np.int32).reshape(-1)
        kernel, source = "gather_axis", lo.add_const(f"idx{op.index}", idx)
    else:
        kernel, source = "gather_axis_rt", Buf(indices)
    sizes = (shape[axis], n, inner, total)
    lo.emit_1d(op, kernel, [lo.operand(params), source, Buf(out), *map(np.int32, sizes)], total)


# -- ONE_HOT ----------------------------------------------------------------------------------


def _one_hot_axis(op: Operator, rank: int) -> int:
    """Where the new axis goes among the output's rank + 1 dimensions."""
    axis = int(op.options.get("axis", -1))
    axis = rank if axis == -1 else axis
    if not 0 <= axis <= rank:
        raise ModelError(f"axis {axis} is out of range for {rank + 1} output dims")
    return axis


def one_hot_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    indices = shape_of(sg, op.inputs[0])
    depth = const_ints(sg, op.inputs[1], "depth")
    if len(depth) != 1 or depth[0] < 0:
        raise ModelError(f"depth {depth} is not one non-negative value")
    axis = _one_hot_axis(op, len(indices))
    return [indices[:axis] + (depth[0],) + indices[axis:]]


def _float_scalar_const(sg: Subgraph, t: int) -> bool:
    tensor = sg.tensors[t]
    return (
        tensor.dtype == np.float32
        and tensor.is_constant
        and len(tensor.shape) <= 1
        and tensor.size == 1
    )


def check_one_hot(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    """LiteRT's conditions on types and values: int32 indices, on and off constant float32
    scalars; a constant depth (the output's size). More is taken than LiteRT takes: any
    axis and any indices shape (LiteRT: the new axis last, one index per batch), the
    kernel placing the new axis anywhere."""
    if len(op.inputs) != 4 or len(op.outputs) != 1 or min(op.inputs) < 0:
        return False, "Expects 4 inputs and 1 output"
    if sg.tensors[op.inputs[0]].dtype != np.int32:
        return False, ONE_HOT_REFUSED
    if not all(_float_scalar_const(sg, t) for t in op.inputs[2:4]):
        return False, ONE_HOT_REFUSED
    if sg.tensors[op.outputs[0]].dtype != np.float32:
        return False, ONE_HOT_REFUSED
    if not sg.tensors[op.inputs[1]].is_constant:
        return False, "Depth must be constant."
    return True, ""


def lower_one_hot(lo: Lowering, op: Operator) -> None:
    indices, out = op.inputs[0], op.outputs[0]
    shape = tuple(lo.t(indices).shape)
    axis = _one_hot_axis(op, len(shape))
    inner = int(np.prod(shape[axis:], dtype=np.int64))
    depth = lo.t(out).shape[axis]
    total = lo.t(out).size
    on, off = (np.float32(lo.const_float(t).reshape(-1)[0]) for t in op.inputs[2:4])
    sizes = map(np.int32, (depth, inner, total))
    lo.emit_1d(op, "one_hot", [lo.operand(indices), Buf(out), *sizes, on, off], total)


register(
    GpuOp(
        "GATHER",
        OpRule(versions(1)),
        lower_gather,
        KERNELS,
        check_gather,
        gather_shapes,
        int32_tensors=True,
        launches=("gather_axis", "gather_axis_rt"),
        family="movement",
        on_demand=KERNELS,
    ),
    GpuOp(
        "ONE_HOT",
        OpRule(versions(1)),
        lower_one_hot,
        KERNELS,
        check_one_hot,
        one_hot_shapes,
        int32_tensors=True,
        launches=("one_hot",),
        family="movement",
        on_demand=KERNELS,
    ),
)
