"""Normalizations: L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, L2_POOL_2D.

Quantized L2_NORMALIZATION follows TFLite's reference kernels: the inverse square root of
each row's sum of squares is a fixed-point multiplier from gemmlowp's Newton-Raphson
iteration (GetInvSqrtQuantizedMultiplierExp), emulated here in int64 with int32 semantics.
"""

from __future__ import annotations

import numpy as np

from ..validate import pool_padding_problem
from .common import (
    ACT_NONE,
    PADDING_SAME,
    apply_activation,
    multiply_by_quantized_multiplier,
    quant_params,
    rounding_divide_by_pot,
)
from .conv import fused_activation, window_geometry
from .pool import _pool, window_counts
from .registry import OpContext, register
from .shape import op_error, require_dtype, required_input

F32 = np.dtype(np.float32)
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
#: TFLite's float L2_NORMALIZATION divides by max(norm, this).
L2_NORM_EPSILON = np.float32(1e-6)
#: Quantized L2_NORMALIZATION outputs have this scale and zero point (by output type).
L2_NORM_OUTPUT_SCALE = 1.0 / 128.0
L2_NORM_OUTPUT_ZERO_POINT = {np.dtype(np.int8): 0, np.dtype(np.uint8): 128}


# -- gemmlowp fixed point, vectorised over int64 arrays holding int32 values ---------------


def _wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values wrapped to int32 as C++ arithmetic on int32 would leave them."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^31), saturating the one overflow."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))  # C++ truncation
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)


def _saturating_shl(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT with a positive exponent: x * 2^exponent, clamped."""
    limit = 1 << (31 - exponent)
    return np.where(x >= limit, INT32_MAX, np.where(x <= -limit, INT32_MIN, x << exponent))


def inv_sqrt_multiplier(acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, right shift) with multiplier * 2^-shift / 2^31 ~= 1 / sqrt(acc), per
    element of the int32 sums `acc`: TFLite's GetInvSqrtQuantizedMultiplierExp (before it
    negates the shift); 0 and 1 both give (INT32_MAX, 0)."""
    acc = np.asarray(acc, np.int64)
    small = acc <= 1
    x = np.where(small, 2, acc)
    shift = np.full(x.shape, 11, np.int64)
    while np.any(big := x >= (1 << 29)):
        x = np.where(big, x // 4, x)
        shift += big
    leading_zeros = 32 - np.frexp(x.astype(np.float64))[1]  # x < 2^29: exact
    pairs = (leading_zeros - 1) // 2 - 1
    shift -= pairs
    x = x << (2 * pairs)
    half_input = rounding_divide_by_pot(x >> 1, 1)  # Q3.28
    half_three = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
    y = np.full(x.shape, 1 << 28, np.int64)  # 1.0 in Q3.28
    for _ in range(5):  # Newton-Raphson on 1/sqrt, as gemmlowp does it
        y3 = _saturating_shl(_high_mul(_high_mul(y, y), y), 6)
        y = _saturating_shl(_wrap32(_high_mul(half_three, y) - _high_mul(half_input, y3)), 3)
    y = _high_mul(y, 1518500250)  # times sqrt(2) / 2 in Q0.31
    y = np.where(shift < 0, _wrap32(y << np.maximum(-shift, 0)), y)
    shift = np.maximum(shift, 0)
    return np.where(small, INT32_MAX, y), np.where(small, 0, shift)


# -- L2_NORMALIZATION -----------------------------------------------------------------------


def _check_l2_norm_output(ctx: OpContext, dtype: np.dtype) -> int:
    """The input zero point of a quantized L2_NORMALIZATION, after checking the output's
    fixed quantization (scale 1/128; zero point 0 for int8, 128 for uint8) as TFLite."""
    oq = quant_params(ctx.out_tensors[0], "output")
    scale, zero = float(oq.scale[0]), int(oq.zero_point[0])
    if scale != L2_NORM_OUTPUT_SCALE or zero != L2_NORM_OUTPUT_ZERO_POINT[dtype]:
        raise op_error(
            ctx,
            f"a {dtype.name} output must have scale 1/128 and zero point "
            f"{L2_NORM_OUTPUT_ZERO_POINT[dtype]}, got {scale} and {zero}",
        )
    return int(quant_params(ctx.in_tensors[0], "input").zero_point[0])


@register("L2_NORMALIZATION", versions=(1, 2))
def l2_normalization(ctx: OpContext) -> np.ndarray:
    """x / ||x|| along the last axis (float32, or int8/uint8 with an output of scale 1/128)."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (np.float32, np.int8, np.uint8))
    if ctx.out_tensors[0].dtype != x.dtype:
        raise op_error(ctx, f"output {ctx.out_tensors[0].dtype.name} differs from input")
    if x.ndim == 0:
        raise op_error(ctx, "input must have at least one dimension, got a scalar")
    if int(ctx.opt("fused_activation_function", ACT_NONE)) != ACT_NONE:
        raise op_error(ctx, "fused activations are not supported (TFLite refuses them too)")
    if x.dtype == F32:
        norm = np.sqrt(np.sum(np.square(x, dtype=np.float64), axis=-1, keepdims=True))
        return (x / np.maximum(norm, L2_NORM_EPSILON)).astype(F32)
    zero = _check_l2_norm_output(ctx, x.dtype)
    diff = x.astype(np.int64) - zero
    mult, shift = inv_sqrt_multiplier(np.sum(diff * diff, axis=-1, keepdims=True))
    if x.dtype == np.int8:
        out = multiply_by_quantized_multiplier(diff, mult, 7 - shift)
        return np.clip(out, -128, 127).astype(np.int8)
    out = 128 + rounding_divide_by_pot(_high_mul(128 * diff, mult), shift)
    return np.clip(out, 0, 255).astype(np.uint8)


# -- LOCAL_RESPONSE_NORMALIZATION -----------------------------------------------------------


@register("LOCAL_RESPONSE_NORMALIZATION", versions=(1,))
def local_response_normalization(ctx: OpContext) -> np.ndarray:
    """x * (bias + alpha * sum of x^2 over channels c - radius .. c + radius)^-beta (float32,
    NHWC; TensorFlow's tf.nn.local_response_normalization)."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (F32,))
    if x.ndim != 4:
        raise op_error(ctx, f"expects a 4-D input, got {list(x.shape)}")
    radius = int(ctx.opt("radius", 0))
    if radius < 0:
        raise op_error(ctx, f"radius {radius} must not be negative")
    bias, alpha, beta = (np.float64(ctx.opt(k, 0.0)) for k in ("bias", "alpha", "beta"))
    depth = x.shape[-1]
    # NOTE: LiteRT's reference kernel sums channels c - radius .. c + radius - 1 (one short);
    # its builtin kernel, TensorFlow and the GPU delegate sum c - radius .. c + radius.
    reach = min(radius, max(depth - 1, 0))  # channels further away are all outside
    squares = np.pad(np.square(x, dtype=np.float64), [(0, 0)] * 3 + [(reach, reach)])
    window = np.zeros(x.shape, np.float64)
    for offset in range(2 * reach + 1):
        window += squares[..., offset : offset + depth]
    with np.errstate(all="ignore"):
        return (x * np.power(bias + alpha * window, -beta)).astype(F32)


# -- L2_POOL_2D -----------------------------------------------------------------------------


@register("L2_POOL_2D", versions=(1,))
def l2_pool_2d(ctx: OpContext) -> np.ndarray:
    """sqrt(mean of x^2) over each window's real (unpadded) positions, NHWC float32, with a
    fused activation."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (F32,))
    if ctx.out_tensors[0].dtype != F32:
        raise op_error(ctx, f"output {ctx.out_tensors[0].dtype.name} is not float32")
    if x.ndim != 4:
        raise op_error(ctx, f"expects a 4-D input, got {list(x.shape)}")
    k = (int(ctx.opt("filter_height", 1)), int(ctx.opt("filter_width", 1)))
    if min(k) <= 0:
        raise op_error(ctx, f"filter size {list(k)} must be positive")
    if int(ctx.opt("padding", PADDING_SAME)) == PADDING_SAME:
        problem = pool_padding_problem(ctx.options, x.shape[1:3])
        if problem:
            raise op_error(ctx, problem)
    g = window_geometry(ctx, x.shape[1:3], k)
    act = fused_activation(ctx)
    sums = _pool(np.square(x), g, k, 0, np.add)
    counts = window_counts(x.shape[1:3], g, k).astype(F32)
    with np.errstate(invalid="ignore", divide="ignore"):
        return apply_activation(np.sqrt(sums / counts).astype(F32), act)
