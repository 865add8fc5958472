"""Matrix products: FULLY_CONNECTED (float32, int8/uint8, hybrid) and BATCH_MATMUL (float32,
int8).

Quantized products accumulate (q - zero_point) exactly in float64, then add the int32 bias
and requantize with TFLite's fixed-point multipliers (per output channel where the weights
are per-channel).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .common import (
    check_float_or_quantized,
    quant_params,
    quantize_rows_asymmetric,
    quantize_rows_symmetric,
    zero_points,
)
from .conv import float_epilogue, fused_activation, quant_epilogue
from .registry import OpContext, register


def _fc_out_shape(ctx: OpContext, x: np.ndarray, w: np.ndarray) -> tuple[int, ...]:
    if ctx.opt("keep_num_dims", False):
        return (*x.shape[:-1], w.shape[0])
    return (x.size // w.shape[1], w.shape[0])


def _check_fc(ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> None:
    if int(ctx.opt("weights_format", 0)) != 0:
        raise ModelError(f"{ctx.op.describe()}: only the default weights format is supported")
    if w.ndim != 2 or w.shape[1] == 0 or x.ndim < 1:
        raise ModelError(f"{ctx.op.describe()}: weights {list(w.shape)} must be [units, depth]")
    # Without keep_num_dims the input is flattened to rows of the weights' depth.
    if ctx.opt("keep_num_dims", False):
        fits = x.shape[-1] == w.shape[1]
    else:
        fits = x.size % w.shape[1] == 0
    if not fits:
        raise ModelError(
            f"{ctx.op.describe()}: weights {list(w.shape)} do not fit input {list(x.shape)}"
        )
    if bias is not None and bias.size != w.shape[0]:
        raise ModelError(f"{ctx.op.describe()}: bias of {bias.size} values for {w.shape[0]} units")


def _is_hybrid(x: np.ndarray, w: np.ndarray, out_dtype: np.dtype) -> bool:
    return x.dtype == np.float32 and w.dtype == np.int8 and out_dtype == np.float32


@register("FULLY_CONNECTED", versions=(1, 3, 4, 5, 6, 9, 12))
def fully_connected(ctx: OpContext) -> np.ndarray:
    """y = x · Wᵀ + b over the last axis of x, with keep_num_dims; float, quantized, or
    hybrid (float input, int8 weights: dynamic-range quantization)."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.input(2)
    x_t, w_t, out_t = ctx.in_tensors[0], ctx.in_tensors[1], ctx.out_tensors[0]
    if _is_hybrid(x, w, out_t.dtype):
        return _fully_connected_hybrid(ctx, x, w, bias)
    quantized = check_float_or_quantized(ctx.op.describe(), x_t, w_t, out_t)
    _check_fc(ctx, x, w, bias)
    shape = _fc_out_shape(ctx, x, w)
    x2 = x.reshape(-1, w.shape[1])
    act = fused_activation(ctx, clamps_only=True)
    if not quantized:
        return float_epilogue(x2 @ w.T, bias, act).reshape(shape)
    xq = x2.astype(np.float64) - zero_points(x_t, "input")[0]
    wzp = zero_points(w_t, "weights")
    wq = w.astype(np.float64) - (wzp[:, None] if wzp.size > 1 else wzp[0])
    return quant_epilogue(xq @ wq.T, bias, x_t, w_t, out_t, act).reshape(shape)


def _fully_connected_hybrid(
    ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None
) -> np.ndarray:
    _check_fc(ctx, x, w, bias)
    act = fused_activation(ctx, clamps_only=True)
    shape = _fc_out_shape(ctx, x, w)
    w_scale = quant_params(ctx.in_tensors[1], "weights").scale.astype(np.float32)
    asymmetric = bool(ctx.opt("asymmetric_quantize_inputs", False))
    acc = hybrid_matmul(x.reshape(-1, w.shape[1]), w, w_scale, asymmetric)
    return float_epilogue(acc, bias, act).reshape(shape)


def hybrid_matmul(
    x2: np.ndarray, w: np.ndarray, w_scale: np.ndarray, asymmetric: bool
) -> np.ndarray:
    """x2 · Wᵀ as TFLite's hybrid kernels compute it: each row of float `x2` quantized to
    int8 on the fly, integer products, then scaled back to float32 (no bias)."""
    q, scale, offset = (quantize_rows_asymmetric if asymmetric else quantize_rows_symmetric)(x2)
    wf = w.astype(np.float64)
    dot = q @ wf.T - offset[:, None] * wf.sum(axis=1)[None, :]  # exact integers
    return dot.astype(np.float32) * (scale[:, None] * w_scale[None, :])


def _adjoint(a: np.ndarray, adj: bool) -> np.ndarray:
    return np.swapaxes(a, -1, -2) if adj else a


@register("BATCH_MATMUL", versions=(1, 2))
def batch_matmul(ctx: OpContext) -> np.ndarray:
    """lhs · rhs over the last two axes (adj_x / adj_y transpose them), batch broadcast."""
    lhs, rhs = ctx.inputs[0], ctx.inputs[1]
    l_t, r_t, out_t = ctx.in_tensors[0], ctx.in_tensors[1], ctx.out_tensors[0]
    quantized = check_float_or_quantized(ctx.op.describe(), l_t, r_t, out_t)
    if lhs.ndim < 2 or rhs.ndim < 2:
        raise ModelError(f"{ctx.op.describe()}: operands must have rank 2 or more")
    a = _adjoint(lhs, bool(ctx.opt("adj_x", False)))
    b = _adjoint(rhs, bool(ctx.opt("adj_y", False)))
    if a.shape[-1] != b.shape[-2]:
        raise ModelError(
            f"{ctx.op.describe()}: cannot multiply {list(lhs.shape)} by {list(rhs.shape)}"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError as exc:
        raise ModelError(f"{ctx.op.describe()}: batch dimensions do not broadcast") from exc
    if not quantized:
        return np.matmul(a, b).astype(np.float32, copy=False)
    if zero_points(r_t, "rhs").size > 1:
        raise ModelError(f"{ctx.op.describe()}: per-channel quantized operands are not supported")
    aq = a.astype(np.float64) - zero_points(l_t, "lhs")[0]
    bq = b.astype(np.float64) - zero_points(r_t, "rhs")[0]
    return quant_epilogue(np.matmul(aq, bq), None, l_t, r_t, out_t, 0)
