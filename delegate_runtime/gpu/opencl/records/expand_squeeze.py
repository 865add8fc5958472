"""EXPAND_DIMS and SQUEEZE: reshapes by another name, a shared buffer as RESHAPE's.

LiteRT's delegate takes neither (its parsers have no entry for them), so a converter's
`tf.expand_dims` splits a partition there; here they cost nothing and keep it whole (a
deliberate difference, docs/gpu_ops.md)."""

from __future__ import annotations

from ....errors import ModelError
from ....graph import Operator, Subgraph
from .geometry import Shape, const_ints, shape_of
from .record import GpuOp, OpRule, register, versions
from .shape_inputs import constant_shape_inputs


def expand_dims_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    axes = const_ints(sg, op.inputs[1], "EXPAND_DIMS's axis")
    if len(axes) != 1 or not -len(x) - 1 <= axes[0] <= len(x):
        raise ModelError(f"EXPAND_DIMS axis {axes} out of range for {list(x)}")
    axis = axes[0] % (len(x) + 1)
    return [(*x[:axis], 1, *x[axis:])]


def squeeze_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    dims = list(op.options.get("squeeze_dims", None) or [])
    if not dims:
        return [tuple(d for d in x if d != 1)]
    if any(not -len(x) <= d < len(x) or x[d] != 1 for d in dims):
        raise ModelError(f"SQUEEZE dims {dims} are not size-1 dimensions of {list(x)}")
    drop = {d % len(x) for d in dims}
    return [tuple(d for i, d in enumerate(x) if i not in drop)]


def lower_alias(lo, op: Operator) -> None:
    lo.out.alias[op.outputs[0]] = op.inputs[0]


register(
    GpuOp(
        "EXPAND_DIMS",
        OpRule(versions(1)),
        lower_alias,
        (),
        constant_shape_inputs,
        expand_dims_shapes,
        launches=(),
        family="movement",
    ),
    GpuOp(
        "SQUEEZE",
        OpRule(versions(1)),
        lower_alias,
        shapes=squeeze_shapes,
        launches=(),
        family="movement",
    ),
)
