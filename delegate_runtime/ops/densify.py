"""DENSIFY: a sparse constant expanded to its dense tensor.

The reader already expands sparse constants (checking every segment and index), so the
kernel checks what LiteRT's Prepare checks and hands the dense array on. The GPU delegate
folds DENSIFY into a constant at preparation, as TFLite's does.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .elementwise import unsupported
from .registry import OpContext, register

#: Value types LiteRT's DENSIFY kernel handles.
DENSIFY_TYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int8))


@register("DENSIFY", versions=(1,))
def densify(ctx: OpContext) -> np.ndarray:
    """The dense tensor of a sparse constant (float32, float16 or int8)."""
    if len(ctx.inputs) != 1 or len(ctx.out_tensors) != 1:
        raise ModelError(f"{ctx.op.describe()}: takes one input and gives one output")
    src = ctx.in_tensors[0]
    if src is None or not src.is_constant or src.sparsity is None:
        name = f"tensor {src.index} '{src.name}'" if src is not None else "its input"
        raise ModelError(f"{ctx.op.describe()}: {name} must be a sparse constant")
    if src.dtype not in DENSIFY_TYPES:
        raise unsupported(ctx, src.dtype)
    out = ctx.out_tensors[0]
    if out.dtype != src.dtype:
        raise ModelError(
            f"{ctx.op.describe()}: output '{out.name}' is {out.dtype.name}, input {src.dtype.name}"
        )
    return np.array(src.data)
