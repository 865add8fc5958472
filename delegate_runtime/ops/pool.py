"""Pooling: AVERAGE_POOL_2D and MAX_POOL_2D (NHWC), float32 and int8/uint8/int16.

Padded positions are left out: max ignores them, average divides by the count of real
positions under each window. Quantized pooling keeps the input's scale and zero point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..graph import Tensor
from ..validate import pool_padding_problem
from .common import PADDING_SAME, apply_activation, quant_params, quantized_activation_range
from .conv import Geometry, fused_activation, window_geometry
from .registry import OpContext, register
from .shape import check_output

_QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def _setup(ctx: OpContext) -> tuple[np.ndarray, Geometry, tuple[int, int], int, bool]:
    """Input, geometry, filter size, activation and whether the op is quantized."""
    x = ctx.inputs[0]
    x_t, out_t = ctx.in_tensors[0], ctx.out_tensors[0]
    if x.dtype != out_t.dtype or (x.dtype != np.float32 and x.dtype not in _QUANTIZED):
        raise ModelError(
            f"{ctx.op.describe()}: input {x.dtype.name} / output {out_t.dtype.name} is not "
            "supported (float32, int8, uint8, int16)"
        )
    if x.ndim != 4:
        raise ModelError(f"{ctx.op.describe()}: expects a 4-D input, got {list(x.shape)}")
    k = (int(ctx.opt("filter_height", 1)), int(ctx.opt("filter_width", 1)))
    if min(k) <= 0:
        raise ModelError(f"{ctx.op.describe()}: filter size {list(k)} must be positive")
    quantized = x.dtype != np.float32
    if quantized:
        _check_same_quantization(ctx, x_t, out_t)
    if int(ctx.opt("padding", PADDING_SAME)) == PADDING_SAME:
        problem = pool_padding_problem(ctx.options, x.shape[1:3])
        if problem:
            raise ModelError(f"{ctx.op.describe()}: {problem}")
    g = window_geometry(ctx, x.shape[1:3], k)
    check_output(ctx, (x.shape[0], *g.out_hw, x.shape[3]), x.dtype)
    return x, g, k, fused_activation(ctx), quantized


def _check_same_quantization(ctx: OpContext, x_t: Tensor, out_t: Tensor) -> None:
    xq, oq = quant_params(x_t, "input"), quant_params(out_t, "output")
    if float(xq.scale[0]) != float(oq.scale[0]) or int(xq.zero_point[0]) != int(oq.zero_point[0]):
        raise ModelError(
            f"{ctx.op.describe()}: input and output quantization must be equal "
            f"(scale {xq.scale[0]} vs {oq.scale[0]}, zero point {xq.zero_point[0]} vs "
            f"{oq.zero_point[0]})"
        )


def _clamp_quantized(y: np.ndarray, ctx: OpContext, act: int) -> np.ndarray:
    out_t = ctx.out_tensors[0]
    lo, hi = quantized_activation_range(act, quant_params(out_t, "output"), out_t.dtype)
    return np.clip(y, lo, hi).astype(out_t.dtype)


def _pool_axis(
    x: np.ndarray, axis: int, k: int, stride: int, pad: int, out: int, fill: float, reduce: Any
) -> np.ndarray:
    """Pool `x` along one axis: each of `out` windows of `k` taps, `stride` apart, starting
    `pad` before the first element; positions outside `x` hold `fill` (left out).

    Taps that fall outside `x` for every window are dropped first, so a huge filter costs
    no more than the input does (LiteRT's kernels clip each window to the input alike)."""
    size = x.shape[axis]
    first = max(0, pad - (out - 1) * stride)  # earlier taps: before the input, every window
    taps = min(k, size + pad) - first  # later taps: past the input, every window
    before = pad - first
    after = max(0, taps + (out - 1) * stride - before - size)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (before, after)
    xp = np.pad(x, widths, constant_values=fill)

    def tap(t: int) -> np.ndarray:
        index = [slice(None)] * x.ndim
        index[axis] = slice(t, t + (out - 1) * stride + 1, stride)
        return xp[tuple(index)]

    acc = tap(0).copy()
    for t in range(1, taps):
        reduce(acc, tap(t), out=acc)
    return acc


def _pool(x: np.ndarray, g: Geometry, k: tuple[int, int], fill: float, reduce: Any) -> np.ndarray:
    """Separable pooling of NHWC `x`: rows, then columns (max and sum are separable)."""
    (oh, ow), (sh, sw) = g.out_hw, g.stride
    if oh == 0 or ow == 0:
        return np.zeros((x.shape[0], oh, ow, x.shape[3]), x.dtype)
    rows = _pool_axis(x, 1, k[0], sh, g.pad_h[0], oh, fill, reduce)
    return _pool_axis(rows, 2, k[1], sw, g.pad_w[0], ow, fill, reduce)


def window_counts(in_hw: tuple[int, int], g: Geometry, k: tuple[int, int]) -> np.ndarray:
    """(1, OH, OW, 1) count of real (unpadded) positions under each window."""
    return _pool(np.ones((1, *in_hw, 1), np.int64), g, k, 0, np.add)


@register("AVERAGE_POOL_2D", versions=(1, 2, 3))
def average_pool_2d(ctx: OpContext) -> np.ndarray:
    """Average over each window's real positions; quantized sums round half away from zero."""
    x, g, k, act, quantized = _setup(ctx)
    acc_dtype = np.int64 if quantized else np.float32
    total = _pool(x.astype(acc_dtype, copy=False), g, k, 0, np.add)
    counts = window_counts(x.shape[1:3], g, k)
    if not quantized:
        return apply_activation(total / counts.astype(np.float32), act)
    # (acc ± count/2) / count with C++ truncation toward zero
    half = counts // 2
    rounded = np.where(total >= 0, (total + half) // counts, -((-total + half) // counts))
    return _clamp_quantized(rounded, ctx, act)


@register("MAX_POOL_2D", versions=(1, 2, 3))
def max_pool_2d(ctx: OpContext) -> np.ndarray:
    """Maximum over each window, padding ignored."""
    x, g, k, act, quantized = _setup(ctx)
    low = np.iinfo(x.dtype).min if quantized else -np.inf
    out = _pool(x, g, k, low, np.maximum)
    if quantized:
        return _clamp_quantized(out, ctx, act)
    return apply_activation(out, act)
