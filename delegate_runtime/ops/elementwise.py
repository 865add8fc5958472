"""Element-wise binary ops with numpy broadcasting: arithmetic, min/max, comparisons, logic.

Quantized (int8/uint8, some int16) paths follow TFLite's reference kernels: inputs are
rescaled to a common fixed-point scale (ADD/SUB: left shift 20, comparisons: 8) and the
result requantized with TFLite's rounding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ModelError
from .common import (
    ACT_NONE,
    ACT_RELU,
    ACT_RELU6,
    ACT_RELU_N1_TO_1,
    apply_activation,
    multiply_by_quantized_multiplier,
    quant_params,
    quantize_multiplier,
    quantized_activation_range,
)
from .registry import OpContext, register

F32 = np.dtype(np.float32)
QUANT_8BIT = (np.dtype(np.int8), np.dtype(np.uint8))
INT_TYPES = (np.dtype(np.int32), np.dtype(np.int64))
#: Fused activations TFLite applies as a clamp (the others are ignored).
RELU_FAMILY = (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6)


# -- helpers ------------------------------------------------------------------------------


def unsupported(ctx: OpContext, dtype: np.dtype) -> ModelError:
    """The error for a dtype (combination) an op's kernel does not handle."""
    return ModelError(f"{ctx.op.describe()}: {np.dtype(dtype).name} tensors are not supported")


def _pair(ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    a, b = ctx.input(0), ctx.input(1)
    if a is None or b is None:
        raise ModelError(f"{ctx.op.describe()}: needs two inputs")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError as exc:
        raise ModelError(
            f"{ctx.op.describe()}: shapes {list(a.shape)} and {list(b.shape)} do not broadcast"
        ) from exc
    if a.dtype != b.dtype:
        raise ModelError(f"{ctx.op.describe()}: input types {a.dtype} and {b.dtype} differ")
    return a, b


def _fixed(real: float) -> tuple[int, int]:
    """(multiplier, shift) of a real multiplier, as TFLite's QuantizeMultiplier."""
    return quantize_multiplier(float(real))


def _scale_zp(ctx: OpContext, tensor_index: int, output: bool = False) -> tuple[float, int]:
    t = ctx.out_tensors[tensor_index] if output else ctx.in_tensors[tensor_index]
    q = quant_params(t, "output" if output else "input")
    return float(q.scale[0]), int(q.zero_point[0])


def _is_quantized(ctx: OpContext, dtype: np.dtype) -> bool:
    return dtype in QUANT_8BIT or dtype == np.int16


def _act(ctx: OpContext) -> int:
    """The fused activation; TANH and SIGN_BIT are no-ops in TFLite's builtin kernels
    (CalculateActivationRange only clamps for the RELU family)."""
    act = int(ctx.opt("fused_activation_function", ACT_NONE))
    return act if act in RELU_FAMILY else ACT_NONE


def _float_or_int(
    ctx: OpContext, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray | None:
    """Float32/int32/int64 path of an arithmetic op with a fused activation, else None."""
    a, b = _pair(ctx)
    if a.dtype == F32:
        with np.errstate(all="ignore"):
            return apply_activation(fn(a, b).astype(F32, copy=False), _act(ctx))
    if a.dtype in INT_TYPES:
        with np.errstate(over="ignore"):
            return apply_activation(fn(a, b).astype(a.dtype, copy=False), _act(ctx))
    return None


def _clamp(ctx: OpContext, raw: np.ndarray, act: int = ACT_NONE) -> np.ndarray:
    out = ctx.out_tensors[0]
    lo, hi = quantized_activation_range(act, quant_params(out, "output"), out.dtype)
    return np.clip(raw, lo, hi).astype(out.dtype)


# -- ADD / SUB ----------------------------------------------------------------------------


def _int16_pot(ctx: OpContext) -> bool:
    """Whether an int16 ADD/SUB takes TFLite's power-of-two-scale path (not handled here)."""
    if not ctx.opt("pot_scale_int16", True):
        return False
    scales = [_scale_zp(ctx, 0)[0], _scale_zp(ctx, 1)[0], _scale_zp(ctx, 0, output=True)[0]]
    return all(np.log2(s) == round(np.log2(s)) for s in scales)


def _quantized_add(ctx: OpContext, sign: int) -> np.ndarray:
    """TFLite's general quantized ADD/SUB: both inputs to a shared scale, then requantize."""
    a, b = _pair(ctx)
    if a.dtype == np.int16 and _int16_pot(ctx):
        raise unsupported(ctx, "int16 (power-of-two scales)")
    left_shift = 15 if a.dtype == np.int16 else 20
    (s1, z1), (s2, z2) = _scale_zp(ctx, 0), _scale_zp(ctx, 1)
    s_out, z_out = _scale_zp(ctx, 0, output=True)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = _fixed(s1 / twice_max)
    m2, sh2 = _fixed(s2 / twice_max)
    mo, sho = _fixed(twice_max / ((1 << left_shift) * s_out))
    x1 = (a.astype(np.int64) - z1) << left_shift
    x2 = (b.astype(np.int64) - z2) << left_shift
    raw = multiply_by_quantized_multiplier(x1, m1, sh1) + sign * multiply_by_quantized_multiplier(
        x2, m2, sh2
    )
    return _clamp(ctx, multiply_by_quantized_multiplier(raw, mo, sho) + z_out, _act(ctx))


@register("ADD", versions=(1, 2, 3, 4, 5))
def add(ctx: OpContext) -> np.ndarray:
    """a + b with broadcasting and a fused activation."""
    out = _float_or_int(ctx, np.add)
    if out is not None:
        return out
    if _is_quantized(ctx, ctx.inputs[0].dtype):
        return _quantized_add(ctx, 1)
    raise unsupported(ctx, ctx.inputs[0].dtype)


@register("SUB", versions=(1, 2, 3, 4, 5))
def sub(ctx: OpContext) -> np.ndarray:
    """a - b with broadcasting and a fused activation."""
    out = _float_or_int(ctx, np.subtract)
    if out is not None:
        return out
    if _is_quantized(ctx, ctx.inputs[0].dtype):
        return _quantized_add(ctx, -1)
    raise unsupported(ctx, ctx.inputs[0].dtype)


# -- MUL / DIV ----------------------------------------------------------------------------


@register("MUL", versions=(1, 2, 3, 4, 5, 6, 7))
def mul(ctx: OpContext) -> np.ndarray:
    """a * b with broadcasting and a fused activation."""
    out = _float_or_int(ctx, np.multiply)
    if out is not None:
        return out
    a, b = _pair(ctx)
    if not _is_quantized(ctx, a.dtype):
        raise unsupported(ctx, a.dtype)
    (s1, z1), (s2, z2) = _scale_zp(ctx, 0), _scale_zp(ctx, 1)
    s_out, z_out = _scale_zp(ctx, 0, output=True)
    # TFLite's Prepare forms the multiplier in float32 (float * float / float), not double.
    m, sh = _fixed(np.float32(s1) * np.float32(s2) / np.float32(s_out))
    prod = (a.astype(np.int64) - z1) * (b.astype(np.int64) - z2)
    return _clamp(ctx, multiply_by_quantized_multiplier(prod, m, sh) + z_out, _act(ctx))


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++ integer division (rounds toward zero)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _check_nonzero(ctx: OpContext, b: np.ndarray) -> None:
    if b.dtype.kind in "iu" and np.any(b == 0):
        raise ModelError(f"{ctx.op.describe()}: integer division by zero")


@register("DIV", versions=(1, 2))
def div(ctx: OpContext) -> np.ndarray:
    """a / b (integers round toward zero) with broadcasting and a fused activation."""
    a, b = _pair(ctx)
    if a.dtype == np.int32:
        _check_nonzero(ctx, b)
        return apply_activation(_trunc_div(a, b).astype(np.int32), _act(ctx))
    if a.dtype != F32:
        raise unsupported(ctx, a.dtype)
    return _float_or_int(ctx, np.divide)


@register("FLOOR_DIV", versions=(1, 2, 3))
def floor_div(ctx: OpContext) -> np.ndarray:
    """floor(a / b)."""
    a, b = _pair(ctx)
    if a.dtype == F32:
        with np.errstate(all="ignore"):
            return np.floor(a / b).astype(F32)
    if a.dtype in (np.int8, np.int16, np.int32):
        _check_nonzero(ctx, b)
        return (a.astype(np.int64) // b).astype(a.dtype)
    raise unsupported(ctx, a.dtype)


@register("FLOOR_MOD", versions=(1, 2))
def floor_mod(ctx: OpContext) -> np.ndarray:
    """a mod b with the sign of b."""
    a, b = _pair(ctx)
    if a.dtype == F32:
        with np.errstate(all="ignore"):
            r = np.fmod(a, b)
            return np.where((r != 0) & ((b < 0) != (r < 0)), r + b, r).astype(F32)
    if a.dtype in (np.int8, np.int16, np.int32, np.int64):
        _check_nonzero(ctx, b)
        return np.mod(a, b).astype(a.dtype)
    raise unsupported(ctx, a.dtype)


@register("POW", versions=(1,))
def pow_(ctx: OpContext) -> np.ndarray:
    """a ** b (float32 or int32; negative integer exponents are an error)."""
    a, b = _pair(ctx)
    if a.dtype == F32:
        with np.errstate(all="ignore"):
            return np.power(a, b).astype(F32)
    if a.dtype == np.int32:
        if np.any(b < 0):
            raise ModelError(f"{ctx.op.describe()}: integer POW with a negative exponent")
        with np.errstate(over="ignore"):
            return np.power(a, b).astype(np.int32)
    raise unsupported(ctx, a.dtype)


# -- SQUARED_DIFFERENCE / ADD_N -----------------------------------------------------------


@register("SQUARED_DIFFERENCE", versions=(1, 2))
def squared_difference(ctx: OpContext) -> np.ndarray:
    """(a - b)^2 with broadcasting."""
    a, b = _pair(ctx)
    if a.dtype == F32 or a.dtype == np.int32:
        with np.errstate(all="ignore"):
            d = a - b
            return (d * d).astype(a.dtype)
    if a.dtype != np.int8:
        raise unsupported(ctx, a.dtype)
    left_shift = 7
    (s1, z1), (s2, z2) = _scale_zp(ctx, 0), _scale_zp(ctx, 1)
    s_out, z_out = _scale_zp(ctx, 0, output=True)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = _fixed(s1 / twice_max)
    m2, sh2 = _fixed(s2 / twice_max)
    mo, sho = _fixed(twice_max * twice_max / ((1 << (2 * left_shift)) * s_out))
    x1 = multiply_by_quantized_multiplier((a.astype(np.int64) - z1) << left_shift, m1, sh1)
    x2 = multiply_by_quantized_multiplier((b.astype(np.int64) - z2) << left_shift, m2, sh2)
    d = x1 - x2
    return _clamp(ctx, multiply_by_quantized_multiplier(d * d, mo, sho) + z_out)


@register("ADD_N", versions=(1,))
def add_n(ctx: OpContext) -> np.ndarray:
    """The sum of all inputs (same shape), added in order."""
    xs = [x for x in ctx.inputs if x is not None]
    if not xs or xs[0].dtype not in (F32, np.dtype(np.int32)):
        raise unsupported(ctx, xs[0].dtype if xs else "none")
    acc = xs[0].copy()
    with np.errstate(over="ignore"):
        for x in xs[1:]:
            acc = acc + x
    return acc


# -- MAXIMUM / MINIMUM --------------------------------------------------------------------

_MINMAX_TYPES = (F32, *QUANT_8BIT, np.dtype(np.int16), *INT_TYPES)


@register("MAXIMUM", versions=(1, 2, 3, 4))
def maximum(ctx: OpContext) -> np.ndarray:
    """max(a, b); quantized inputs compare their stored values, as TFLite does."""
    a, b = _pair(ctx)
    if a.dtype not in _MINMAX_TYPES:
        raise unsupported(ctx, a.dtype)
    return np.where(a > b, a, b)


@register("MINIMUM", versions=(1, 2, 3, 4))
def minimum(ctx: OpContext) -> np.ndarray:
    """min(a, b); quantized inputs compare their stored values, as TFLite does."""
    a, b = _pair(ctx)
    if a.dtype not in _MINMAX_TYPES:
        raise unsupported(ctx, a.dtype)
    return np.where(a < b, a, b)


# -- comparisons --------------------------------------------------------------------------


def _rescaled_for_compare(ctx: OpContext, x: np.ndarray, i: int) -> np.ndarray:
    """A quantized input on TFLite's comparison scale (offset, << 8, × scale)."""
    scale, zp = _scale_zp(ctx, i)
    m, sh = _fixed(scale)
    return multiply_by_quantized_multiplier((x.astype(np.int64) - zp) << 8, m, sh)


def _compare(
    ctx: OpContext, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], bools: bool = False
) -> np.ndarray:
    a, b = _pair(ctx)
    if a.dtype in QUANT_8BIT:
        if ctx.in_tensors[0].quantization is not None:
            a, b = _rescaled_for_compare(ctx, a, 0), _rescaled_for_compare(ctx, b, 1)
    elif not (a.dtype in (F32, *INT_TYPES) or (bools and a.dtype == np.bool_)):
        raise unsupported(ctx, a.dtype)
    return fn(a, b)


@register("LESS", versions=(1, 2, 3))
def less(ctx: OpContext) -> np.ndarray:
    """a < b."""
    return _compare(ctx, np.less)


@register("LESS_EQUAL", versions=(1, 2, 3))
def less_equal(ctx: OpContext) -> np.ndarray:
    """a <= b."""
    return _compare(ctx, np.less_equal)


@register("GREATER", versions=(1, 2, 3))
def greater(ctx: OpContext) -> np.ndarray:
    """a > b."""
    return _compare(ctx, np.greater)


@register("GREATER_EQUAL", versions=(1, 2, 3))
def greater_equal(ctx: OpContext) -> np.ndarray:
    """a >= b."""
    return _compare(ctx, np.greater_equal)


@register("EQUAL", versions=(1, 2, 3))
def equal(ctx: OpContext) -> np.ndarray:
    """a == b (bools too)."""
    return _compare(ctx, np.equal, bools=True)


@register("NOT_EQUAL", versions=(1, 2, 3))
def not_equal(ctx: OpContext) -> np.ndarray:
    """a != b (bools too)."""
    return _compare(ctx, np.not_equal, bools=True)


# -- logic --------------------------------------------------------------------------------


def _bools(ctx: OpContext, *xs: np.ndarray) -> None:
    for x in xs:
        if x.dtype != np.bool_:
            raise unsupported(ctx, x.dtype)


@register("LOGICAL_AND", versions=(1,))
def logical_and(ctx: OpContext) -> np.ndarray:
    """a and b, broadcast."""
    a, b = _pair(ctx)
    _bools(ctx, a, b)
    return np.logical_and(a, b)


@register("LOGICAL_OR", versions=(1,))
def logical_or(ctx: OpContext) -> np.ndarray:
    """a or b, broadcast."""
    a, b = _pair(ctx)
    _bools(ctx, a, b)
    return np.logical_or(a, b)


@register("LOGICAL_NOT", versions=(1,))
def logical_not(ctx: OpContext) -> np.ndarray:
    """not a."""
    a = ctx.inputs[0]
    _bools(ctx, a)
    return np.logical_not(a)
