"""Reductions: MEAN, SUM, REDUCE_MAX/MIN/PROD/ANY/ALL, ARG_MAX/ARG_MIN, CUMSUM.

Quantized MEAN follows LiteRT's reference kernels (reduce.cc, BUILTIN_REF): fixed point
with the element count folded into the multiplier. Quantized SUM follows its builtin
kernels, a float rescale of the int32 sum: LiteRT 2.3's reference SUM returns wrong values
for int8 and int16 (negative inputs misread), so it is no oracle there.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ModelError
from .common import multiply_by_quantized_multiplier, quant_params, quantize_multiplier
from .elementwise import unsupported
from .registry import OpContext, register

F32 = np.dtype(np.float32)
INTS = (np.dtype(np.int32), np.dtype(np.int64))
QUANT = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


# -- axes ---------------------------------------------------------------------------------


def raw_axes(ctx: OpContext, position: int = 1) -> list[int]:
    """The axis tensor's values as given (may be negative or repeated)."""
    axis = ctx.input(position)
    if axis is None:
        raise ModelError(f"{ctx.op.describe()}: missing axis input")
    return [int(a) for a in np.asarray(axis).reshape(-1)]


def resolve_axes(ctx: OpContext, axes: list[int], rank: int) -> tuple[int, ...]:
    """Axes made non-negative and unique (in first-seen order); ModelError when out of range."""
    if rank == 0:
        return ()
    out: list[int] = []
    for a in axes:
        r = a + rank if a < 0 else a
        if not 0 <= r < rank:
            raise ModelError(f"{ctx.op.describe()}: axis {a} out of range for rank {rank}")
        if r not in out:
            out.append(r)
    return tuple(out)


def _finish(ctx: OpContext, reduced: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`reduced` (computed with keepdims) shaped as the op's keep_dims asks."""
    if ctx.opt("keep_dims", False):
        return reduced
    return np.squeeze(reduced, axis=axes) if axes else reduced


def _setup(ctx: OpContext) -> tuple[np.ndarray, tuple[int, ...]]:
    x = ctx.input(0)
    if x is None:
        raise ModelError(f"{ctx.op.describe()}: missing input")
    return x, resolve_axes(ctx, raw_axes(ctx), x.ndim)


def _count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _trunc_div(a: np.ndarray, n: int) -> np.ndarray:
    """C++ integer division by a positive count (toward zero)."""
    q = np.abs(a) // n
    return np.where(a < 0, -q, q)


def _clip_to(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


def _round(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))


def _qp(ctx: OpContext, output: bool = False) -> tuple[float, int]:
    t = ctx.out_tensors[0] if output else ctx.in_tensors[0]
    q = quant_params(t, "output" if output else "input")
    return float(q.scale[0]), int(q.zero_point[0])


# -- MEAN ---------------------------------------------------------------------------------


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    """Values as an int32 accumulator holds them (two's complement wrap-around)."""
    return ((x + (1 << 31)) % (1 << 32)) - (1 << 31)


def _mean_quantized(ctx: OpContext, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """reference_ops::QuantizedMeanOrSum, the path LiteRT's reference kernels take for every
    int8/uint8/int16 MEAN (the 4-D spatial case included): the int32 sum less the input zero
    point times the count, scaled by in_scale/out_scale in fixed point with the count folded
    into the multiplier (shifted up by floor(log2 n), at most 32 and at most 31 + shift)."""
    (si, zi), (so, zo) = _qp(ctx), _qp(ctx, output=True)
    if x.dtype == np.int16 and (zi, zo) != (0, 0):
        raise ModelError(
            f"{ctx.op.describe()}: int16 MEAN needs zero points 0 (input {zi}, output {zo})"
        )
    n = _count(x, axes)
    m, sh = quantize_multiplier(si / so)
    up = min(n.bit_length() - 1, 32, 31 + sh)
    m_n, sh_n = (m << up) // n, sh - up
    total = _wrap_int32(x.astype(np.int64).sum(axis=axes, keepdims=True))
    shifted = _wrap_int32(total - zi * n)
    return _clip_to(multiply_by_quantized_multiplier(shifted, m_n, sh_n) + zo, x.dtype)


@register("MEAN", versions=(1, 2, 3))
def mean(ctx: OpContext) -> np.ndarray:
    """Mean over the axes; quantized as TFLite's reference kernels."""
    x, axes = _setup(ctx)
    if x.size == 0:
        raise ModelError(f"{ctx.op.describe()}: empty input")
    if x.dtype == F32:
        out = x.sum(axis=axes, keepdims=True, dtype=np.float64) / _count(x, axes)
        return _finish(ctx, out.astype(F32), axes)
    if x.dtype in INTS:
        total = x.astype(np.int64).sum(axis=axes, keepdims=True)
        return _finish(ctx, _trunc_div(total, _count(x, axes)).astype(x.dtype), axes)
    if x.dtype in QUANT:
        return _finish(ctx, _mean_quantized(ctx, x, axes), axes)
    raise unsupported(ctx, x.dtype)


# -- SUM / PROD / MAX / MIN / ANY / ALL ---------------------------------------------------


def _quantized_sum(ctx: OpContext, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The int32 sum rescaled in float to the output's parameters (QuantizedMeanOrSum)."""
    (si, zi), (so, zo) = _qp(ctx), _qp(ctx, output=True)
    n = _count(x, axes)
    total = x.astype(np.int64).sum(axis=axes, keepdims=True).astype(F32)
    scale = np.float32(si) / np.float32(so)
    bias = np.float32(-zi) * scale * np.float32(n)
    return _clip_to(_round(total * scale + bias) + np.float32(zo), x.dtype)


@register("SUM", versions=(1, 2))
def reduce_sum(ctx: OpContext) -> np.ndarray:
    """Sum over the axes; quantized inputs (same output parameters or not) are rescaled
    and saturate, as LiteRT's builtin kernels (its reference SUM is wrong for int8/int16)."""
    x, axes = _setup(ctx)
    if x.dtype == F32:
        return _finish(ctx, x.sum(axis=axes, keepdims=True, dtype=np.float64).astype(F32), axes)
    if x.dtype in QUANT and ctx.in_tensors[0].quantization is not None:
        return _finish(ctx, _quantized_sum(ctx, x, axes), axes)
    if x.dtype in INTS or x.dtype in QUANT:
        # NOTE: TFLite sums unquantized integers in their own type (wrapping).
        return _finish(ctx, x.sum(axis=axes, keepdims=True, dtype=np.int64).astype(x.dtype), axes)
    raise unsupported(ctx, x.dtype)


def _same_quantization(ctx: OpContext, x: np.ndarray) -> None:
    quantized = x.dtype in QUANT and ctx.in_tensors[0].quantization is not None
    if quantized and _qp(ctx) != _qp(ctx, output=True):
        raise ModelError(f"{ctx.op.describe()}: input and output quantization must match")


@register("REDUCE_MAX", versions=(1, 2, 3))
def reduce_max(ctx: OpContext) -> np.ndarray:
    """Maximum over the axes."""
    x, axes = _setup(ctx)
    if x.dtype not in (F32, *INTS, *QUANT):
        raise unsupported(ctx, x.dtype)
    _same_quantization(ctx, x)
    return _finish(ctx, np.max(x, axis=axes, keepdims=True), axes)


@register("REDUCE_MIN", versions=(1, 2, 3))
def reduce_min(ctx: OpContext) -> np.ndarray:
    """Minimum over the axes."""
    x, axes = _setup(ctx)
    if x.dtype not in (F32, *INTS, *QUANT):
        raise unsupported(ctx, x.dtype)
    _same_quantization(ctx, x)
    return _finish(ctx, np.min(x, axis=axes, keepdims=True), axes)


@register("REDUCE_PROD", versions=(1,))
def reduce_prod(ctx: OpContext) -> np.ndarray:
    """Product over the axes (float32, int32, int64)."""
    x, axes = _setup(ctx)
    if x.dtype not in (F32, *INTS):
        raise unsupported(ctx, x.dtype)
    with np.errstate(over="ignore"):
        return _finish(ctx, np.prod(x, axis=axes, keepdims=True, dtype=x.dtype), axes)


@register("REDUCE_ANY", versions=(1,))
def reduce_any(ctx: OpContext) -> np.ndarray:
    """Logical or over the axes."""
    x, axes = _setup(ctx)
    if x.dtype != np.bool_:
        raise unsupported(ctx, x.dtype)
    return _finish(ctx, np.any(x, axis=axes, keepdims=True), axes)


@register("REDUCE_ALL", versions=(1,))
def reduce_all(ctx: OpContext) -> np.ndarray:
    """Logical and over the axes."""
    x, axes = _setup(ctx)
    if x.dtype != np.bool_:
        raise unsupported(ctx, x.dtype)
    return _finish(ctx, np.all(x, axis=axes, keepdims=True), axes)


# -- ARG_MAX / ARG_MIN --------------------------------------------------------------------

_ARG_TYPES = (F32, np.dtype(np.int8), np.dtype(np.uint8), *INTS, np.dtype(np.bool_))


def _arg(ctx: OpContext, fn: Callable[..., np.ndarray]) -> np.ndarray:
    x = ctx.input(0)
    if x is None or x.dtype not in _ARG_TYPES:
        raise unsupported(ctx, x.dtype if x is not None else "none")
    axes = raw_axes(ctx)
    if len(axes) != 1:
        raise ModelError(f"{ctx.op.describe()}: needs exactly one axis, got {axes}")
    (axis,) = resolve_axes(ctx, axes, x.ndim)
    return fn(x, axis=axis).astype(ctx.out_tensors[0].dtype)


@register("ARG_MAX", versions=(1, 2, 3))
def arg_max(ctx: OpContext) -> np.ndarray:
    """Index of the largest value along the axis (first on ties)."""
    return _arg(ctx, np.argmax)


@register("ARG_MIN", versions=(1, 2, 3))
def arg_min(ctx: OpContext) -> np.ndarray:
    """Index of the smallest value along the axis (first on ties)."""
    return _arg(ctx, np.argmin)


# -- CUMSUM -------------------------------------------------------------------------------


@register("CUMSUM", versions=(1,))
def cumsum(ctx: OpContext) -> np.ndarray:
    """Running sum along the axis, optionally exclusive and/or reversed."""
    x = ctx.input(0)
    if x is None or x.dtype not in (F32, *INTS):
        raise unsupported(ctx, x.dtype if x is not None else "none")
    (axis,) = resolve_axes(ctx, raw_axes(ctx)[:1], x.ndim)
    y = np.flip(x, axis) if ctx.opt("reverse", False) else x
    with np.errstate(over="ignore"):
        out = np.cumsum(y, axis=axis, dtype=x.dtype)
    if ctx.opt("exclusive", False):
        out = np.concatenate(
            [np.zeros_like(np.take(out, [0], axis=axis)), np.delete(out, -1, axis=axis)], axis=axis
        )
    return np.flip(out, axis) if ctx.opt("reverse", False) else out
