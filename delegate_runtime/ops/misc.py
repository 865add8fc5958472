"""Ops converted models carry that belong to no other family: selection and resource
variables (what `tf.Variable` becomes, usually set up by a CALL_ONCE init subgraph)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .registry import OpContext, register

#: Keys in the interpreter's kernel state.
RESOURCE_IDS = "resource_ids"  #: (container, shared_name) -> int32 resource id
RESOURCES = "resources"  #: resource id -> the variable's current value


@register("SELECT", versions=(1, 2, 3, 4))
def select(ctx: OpContext) -> np.ndarray:
    """x where cond else y; a rank-1 cond picks whole rows (TF1 Select)."""
    cond, x, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    if cond.ndim == 1 and x.ndim > 1 and cond.shape[0] == x.shape[0]:
        cond = cond.reshape(cond.shape + (1,) * (x.ndim - 1))
    return np.where(cond, x, y)


@register("SELECT_V2", versions=(1, 2))
def select_v2(ctx: OpContext) -> np.ndarray:
    """x where cond else y, all three broadcast together."""
    return np.where(ctx.inputs[0], ctx.inputs[1], ctx.inputs[2])


@register("WHERE", versions=(1,))
def where(ctx: OpContext) -> np.ndarray:
    """Coordinates [n_true, rank] (int64) of the true (non-zero) elements, row-major."""
    return np.argwhere(ctx.inputs[0]).astype(np.int64)


def _resource_id(ctx: OpContext, handle: np.ndarray) -> int:
    rid = int(np.asarray(handle).reshape(-1)[0])
    if rid not in ctx.state.get(RESOURCE_IDS, {}).values():
        raise ModelError(f"{ctx.op.describe()}: resource id {rid} was never created")
    return rid


@register("VAR_HANDLE", versions=(1,))
def var_handle(ctx: OpContext) -> np.ndarray:
    """The int32 id of the resource variable named (container, shared_name)."""
    ids: dict[tuple[str, str], int] = ctx.state.setdefault(RESOURCE_IDS, {})
    key = (ctx.opt("container", ""), ctx.opt("shared_name", ""))
    rid = ids.setdefault(key, len(ids))
    return np.full(ctx.out_tensors[0].shape, rid, np.int32)


@register("ASSIGN_VARIABLE", versions=(1,))
def assign_variable(ctx: OpContext) -> list[np.ndarray]:
    """Store input 1 as the value of the resource variable input 0."""
    rid = _resource_id(ctx, ctx.inputs[0])
    ctx.state.setdefault(RESOURCES, {})[rid] = np.array(ctx.inputs[1])
    return []


@register("READ_VARIABLE", versions=(1,))
def read_variable(ctx: OpContext) -> np.ndarray:
    """The current value of the resource variable input 0."""
    rid = _resource_id(ctx, ctx.inputs[0])
    value = ctx.state.get(RESOURCES, {}).get(rid)
    if value is None:
        raise ModelError(f"{ctx.op.describe()}: reads resource variable {rid} before any assign")
    return value
