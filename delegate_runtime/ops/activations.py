"""Activations and unary math: RELU family, LOGISTIC, TANH, SOFTMAX, PRELU, EXP, SQRT, ...

Quantized int8/uint8 paths follow LiteRT's CPU kernels: the RELU family, LEAKY_RELU and
PRELU rescale in fixed point; transcendental functions go through a 256-entry lookup
table computed in float (TFLite's LUTPopulate); SOFTMAX uses TFLite's exp table.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..errors import ModelError
from .common import (
    high_mul16,
    multiply_by_quantized_multiplier,
    quant_params,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from .elementwise import QUANT_8BIT, unsupported
from .registry import OpContext, register

F32 = np.dtype(np.float32)
#: Ops LiteRT quantizes to int8 only.
INT8_ONLY = (np.dtype(np.int8),)
FloatFn = Callable[[np.ndarray], np.ndarray]


# -- helpers ------------------------------------------------------------------------------


def _input(ctx: OpContext) -> np.ndarray:
    x = ctx.input(0)
    if x is None:
        raise ModelError(f"{ctx.op.describe()}: missing input")
    return x


def _qparams(ctx: OpContext, output: bool = False) -> tuple[float, int]:
    t = ctx.out_tensors[0] if output else ctx.in_tensors[0]
    q = quant_params(t, "output" if output else "input")
    return float(q.scale[0]), int(q.zero_point[0])


def _round(x: np.ndarray) -> np.ndarray:
    """Round half away from zero (TfLiteRound), keeping the float dtype."""
    return np.sign(x) * np.floor(np.abs(x) + np.asarray(0.5, x.dtype))


def _lut(ctx: OpContext, x: np.ndarray, fn: FloatFn) -> np.ndarray:
    """A quantized unary op through TFLite's float lookup table (LUTPopulate)."""
    out = ctx.out_tensors[0]
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    info = np.iinfo(x.dtype)
    values = np.arange(int(info.min), int(info.max) + 1)
    deq = np.float32(in_scale) * (values - in_zp).astype(F32)
    with np.errstate(all="ignore"):
        transformed = fn(deq).astype(F32)
        q = _round(transformed * np.float32(1.0 / out_scale)) + np.float32(out_zp)
    oi = np.iinfo(out.dtype)
    table = np.clip(np.nan_to_num(q), oi.min, oi.max).astype(out.dtype)
    return table[x.astype(np.int64) - int(info.min)]


def _unary(
    ctx: OpContext,
    fn: FloatFn,
    quantized_lut: bool | tuple = False,
    int_types: tuple = (),
) -> np.ndarray:
    """A float32 unary op, optionally also through the quantized LUT (for int8/uint8, or
    the types given) or on integers."""
    x = _input(ctx)
    if x.dtype == F32:
        with np.errstate(all="ignore"):
            return fn(x).astype(F32, copy=False)
    lut_types = quantized_lut if isinstance(quantized_lut, tuple) else QUANT_8BIT
    if quantized_lut and x.dtype in lut_types:
        return _lut(ctx, x, fn)
    if x.dtype in int_types:
        with np.errstate(over="ignore"):
            return fn(x).astype(x.dtype)
    raise unsupported(ctx, x.dtype)


def _fixed(real: float) -> tuple[int, int]:
    return quantize_multiplier(float(real))


def _type_clip(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x, info.min, info.max).astype(dtype)


# -- RELU family --------------------------------------------------------------------------


def _relu_x(ctx: OpContext, lo: float, hi: float) -> np.ndarray:
    """Clamp to [lo, hi]; quantized inputs are rescaled to the output (TFLite's ReluX)."""
    x = _input(ctx)
    if x.dtype == F32:
        return np.clip(x, lo, hi).astype(F32)
    if x.dtype not in QUANT_8BIT and x.dtype != np.int16:
        raise unsupported(ctx, x.dtype)
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    info = np.iinfo(ctx.out_tensors[0].dtype)
    q_lo = max(int(info.min), out_zp + int(_round(np.float32(lo) / np.float32(out_scale))))
    q_hi = int(info.max)
    if math.isfinite(hi):
        q_hi = min(q_hi, out_zp + int(_round(np.float32(hi) / np.float32(out_scale))))
    m, sh = _fixed(in_scale / out_scale)
    raw = multiply_by_quantized_multiplier(x.astype(np.int64) - in_zp, m, sh) + out_zp
    return np.clip(raw, q_lo, q_hi).astype(ctx.out_tensors[0].dtype)


@register("RELU", versions=(1, 2, 3))
def relu(ctx: OpContext) -> np.ndarray:
    """max(x, 0)."""
    return _relu_x(ctx, 0.0, math.inf)


@register("RELU6", versions=(1, 2, 3))
def relu6(ctx: OpContext) -> np.ndarray:
    """clamp(x, 0, 6)."""
    return _relu_x(ctx, 0.0, 6.0)


@register("RELU_N1_TO_1", versions=(1,))
def relu_n1_to_1(ctx: OpContext) -> np.ndarray:
    """clamp(x, -1, 1)."""
    return _relu_x(ctx, -1.0, 1.0)


@register("RELU_0_TO_1", versions=(1,))
def relu_0_to_1(ctx: OpContext) -> np.ndarray:
    """clamp(x, 0, 1)."""
    return _relu_x(ctx, 0.0, 1.0)


@register("LEAKY_RELU", versions=(1, 2))
def leaky_relu(ctx: OpContext) -> np.ndarray:
    """x if x > 0 else alpha * x."""
    x = _input(ctx)
    alpha = float(ctx.opt("alpha", 0.2))
    if x.dtype == F32:
        return np.where(x > 0, x, x * np.float32(alpha)).astype(F32)
    if x.dtype not in QUANT_8BIT and x.dtype != np.int16:
        raise unsupported(ctx, x.dtype)
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    m_id, sh_id = _fixed(in_scale / out_scale)
    m_a, sh_a = _fixed(in_scale * np.float32(alpha) / out_scale)
    v = x.astype(np.int64) - in_zp
    raw = np.where(
        v >= 0,
        multiply_by_quantized_multiplier(v, m_id, sh_id),
        multiply_by_quantized_multiplier(v, m_a, sh_a),
    )
    return _type_clip(raw + out_zp, ctx.out_tensors[0].dtype)


@register("PRELU", versions=(1,))
def prelu(ctx: OpContext) -> np.ndarray:
    """x if x >= 0 else alpha * x, alpha broadcast against x."""
    x, alpha = _input(ctx), ctx.input(1)
    if alpha is None:
        raise ModelError(f"{ctx.op.describe()}: missing alpha")
    if x.dtype == F32:
        return np.where(x >= 0, x, x * alpha).astype(F32)
    if x.dtype not in QUANT_8BIT:
        raise unsupported(ctx, x.dtype)
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    aq = quant_params(ctx.in_tensors[1], "alpha")
    a_scale, a_zp = float(aq.scale[0]), int(aq.zero_point[0])
    m1, sh1 = _fixed(in_scale / out_scale)
    m2, sh2 = _fixed(in_scale * a_scale / out_scale)
    v = x.astype(np.int64) - in_zp
    a = alpha.astype(np.int64) - a_zp
    raw = np.where(
        v >= 0,
        multiply_by_quantized_multiplier(v, m1, sh1),
        multiply_by_quantized_multiplier(v * a, m2, sh2),
    )
    return _type_clip(raw + out_zp, ctx.out_tensors[0].dtype)


# -- sigmoid-like -------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.minimum(np.float32(6), np.maximum(np.float32(0), x + np.float32(3))) / 6


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7)."""
    x64 = np.asarray(x, np.float64)
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x64))
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return np.sign(x64) * (1.0 - poly * np.exp(-x64 * x64))


@register("LOGISTIC", versions=(1, 2, 3))
def logistic(ctx: OpContext) -> np.ndarray:
    """1 / (1 + exp(-x))."""
    return _unary(ctx, _sigmoid, quantized_lut=True)


@register("TANH", versions=(1, 2, 3))
def tanh(ctx: OpContext) -> np.ndarray:
    """tanh(x)."""
    return _unary(ctx, np.tanh, quantized_lut=True)


def _saturate16(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -(1 << 15), (1 << 15) - 1)


def _multiplier16(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier then DownScaleInt32ToInt16Multiplier."""
    m, shift = quantize_multiplier(real)
    return (1 << 15) - 1 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16, shift


def _hard_swish_quantized(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """TFLite's fixed-point int16 HardSwish (reference_ops::HardSwish, HardSwishPrepare)."""
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    hires_scale = np.float32(1.0 / 128.0) * np.float32(in_scale)
    out_m, out_exp = _multiplier16(float(hires_scale / np.float32(out_scale)))
    relu_m, relu_exp = _multiplier16(float(hires_scale / np.float32(3.0 / 32768.0)))
    if out_exp > 0:
        raise ModelError(
            f"{ctx.op.describe()}: output scale {out_scale} is too small for input scale "
            f"{in_scale} (TFLite's HardSwishPrepare refuses it)"
        )
    hires = (x.astype(np.int64) - in_zp) * 128
    preshift_out = high_mul16(hires, out_m)
    reluish = hires
    if relu_exp > 0:
        reluish = _saturate16(reluish * (1 << (relu_exp - 1)))
    reluish = high_mul16(reluish, relu_m)
    if relu_exp > 0:
        reluish = _saturate16(reluish * 2)
    if relu_exp < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_exp)
    reluish = (reluish + (1 << 15)) >> 1  # [-1, 1] to [0, 1]
    out = rounding_divide_by_pot(high_mul16(reluish, preshift_out, rounding=False), -out_exp)
    return _type_clip(out + out_zp, ctx.out_tensors[0].dtype)


@register("HARD_SWISH", versions=(1,))
def hard_swish(ctx: OpContext) -> np.ndarray:
    """x * relu6(x + 3) / 6; int8/uint8 in TFLite's 16-bit fixed point."""
    x = _input(ctx)
    if x.dtype in QUANT_8BIT:
        return _hard_swish_quantized(ctx, x)
    return _unary(ctx, _hard_swish)


@register("ELU", versions=(1,))
def elu(ctx: OpContext) -> np.ndarray:
    """x if x >= 0 else exp(x) - 1."""
    return _unary(ctx, lambda x: np.where(x < 0, np.expm1(x), x), quantized_lut=INT8_ONLY)


@register("GELU", versions=(1, 2))
def gelu(ctx: OpContext) -> np.ndarray:
    """Gaussian error linear unit, exact (erf) or tanh-approximated."""
    if ctx.opt("approximate", False):

        def fn(x: np.ndarray) -> np.ndarray:
            cube = np.float32(0.044715) * x * x * x
            inner = np.float32(math.sqrt(2 / math.pi)) * (x + cube)
            return np.float32(0.5) * x * (np.float32(1) + np.tanh(inner))
    else:

        def fn(x: np.ndarray) -> np.ndarray:
            return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(F32)

    x = _input(ctx)
    if x.dtype in QUANT_8BIT and not ctx.opt("approximate", False):
        return _lut(ctx, x, _gelu_table_entry)
    return _unary(ctx, fn, quantized_lut=True)


def _gelu_table_entry(x: np.ndarray) -> np.ndarray:
    """TFLite's GeluTransform in float32, 0.5 * x * erfc(-x / sqrt(2)), for the 256-entry
    table: erfc exact (rounded once to float32), since one ulp moves a table entry."""
    arg = x.astype(F32) * np.float32(-math.sqrt(0.5))
    erfc = np.array([math.erfc(float(v)) for v in arg], F32)
    return np.float32(0.5) * x * erfc


# -- softmax ------------------------------------------------------------------------------


def _softmax_quantized(ctx: OpContext, x: np.ndarray, beta: float) -> np.ndarray:
    """TFLite's table softmax: exp(-in_scale*beta*(max - x)) in float, rounded to output."""
    in_scale, _ = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    xi = x.astype(np.int64)
    diff = (xi.max(axis=-1, keepdims=True) - xi).astype(F32)
    e = np.exp(np.float32(-in_scale * beta) * diff).astype(F32)
    total = np.cumsum(e, axis=-1, dtype=F32)[..., -1:]  # sequential float32 sum
    inv = np.float32(1.0) / (total * np.float32(out_scale))
    q = _round(e * inv).astype(np.int64) + out_zp
    return _type_clip(q, ctx.out_tensors[0].dtype)


@register("SOFTMAX", versions=(1, 2, 3))
def softmax(ctx: OpContext) -> np.ndarray:
    """exp(beta * x) / sum(exp(beta * x)) over the last axis."""
    x = _input(ctx)
    beta = float(ctx.opt("beta", 1.0))
    if x.dtype == F32:
        e = np.exp((x - x.max(axis=-1, keepdims=True)) * np.float32(beta))
        return (e / e.sum(axis=-1, keepdims=True)).astype(F32)
    if x.dtype in QUANT_8BIT and ctx.out_tensors[0].dtype in QUANT_8BIT:
        return _softmax_quantized(ctx, x, beta)
    raise unsupported(ctx, x.dtype)


def _log_softmax_float(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(F32)


@register("LOG_SOFTMAX", versions=(1, 2))
def log_softmax(ctx: OpContext) -> np.ndarray:
    """x - log(sum(exp(x))) over the last axis."""
    x = _input(ctx)
    if x.dtype == F32:
        return _log_softmax_float(x)
    if x.dtype in QUANT_8BIT:
        in_scale, in_zp = _qparams(ctx)
        out_scale, out_zp = _qparams(ctx, output=True)
        real = np.float32(in_scale) * (x.astype(np.int64) - in_zp).astype(F32)
        y = _round(_log_softmax_float(real) / np.float32(out_scale)) + out_zp
        return _type_clip(y, ctx.out_tensors[0].dtype)
    raise unsupported(ctx, x.dtype)


# -- unary math ---------------------------------------------------------------------------


@register("EXP", versions=(1, 2))
def exp(ctx: OpContext) -> np.ndarray:
    """e^x."""
    return _unary(ctx, np.exp, quantized_lut=INT8_ONLY)


@register("LOG", versions=(1, 2))
def log(ctx: OpContext) -> np.ndarray:
    """Natural logarithm."""
    return _unary(ctx, np.log, quantized_lut=INT8_ONLY)


@register("SQRT", versions=(1, 2))
def sqrt(ctx: OpContext) -> np.ndarray:
    """Square root."""
    return _unary(ctx, np.sqrt)


@register("RSQRT", versions=(1, 2, 3))
def rsqrt(ctx: OpContext) -> np.ndarray:
    """1 / sqrt(x)."""
    return _unary(ctx, lambda x: np.float32(1) / np.sqrt(x), quantized_lut=INT8_ONLY)


@register("SIN", versions=(1,))
def sin(ctx: OpContext) -> np.ndarray:
    """Sine."""
    return _unary(ctx, np.sin)


@register("COS", versions=(1,))
def cos(ctx: OpContext) -> np.ndarray:
    """Cosine."""
    return _unary(ctx, np.cos)


@register("SQUARE", versions=(1,))
def square(ctx: OpContext) -> np.ndarray:
    """x * x."""
    return _unary(ctx, np.square)


@register("NEG", versions=(1,))
def neg(ctx: OpContext) -> np.ndarray:
    """-x."""
    return _unary(ctx, np.negative, int_types=(np.dtype(np.int32), np.dtype(np.int64)))


@register("ABS", versions=(1, 2, 3, 4, 5))
def abs_(ctx: OpContext) -> np.ndarray:
    """|x|; quantized inputs are rescaled to the output in fixed point."""
    x = _input(ctx)
    if x.dtype == np.uint8:  # TFLite has no uint8 ABS kernel
        raise unsupported(ctx, x.dtype)
    if x.dtype not in QUANT_8BIT and x.dtype != np.int16:
        return _unary(ctx, np.abs, int_types=(np.dtype(np.int32),))
    in_scale, in_zp = _qparams(ctx)
    out_scale, out_zp = _qparams(ctx, output=True)
    v = np.abs(x.astype(np.int64) - in_zp)
    if in_scale != out_scale or in_zp != out_zp:
        m, sh = _fixed(in_scale / out_scale)
        v = multiply_by_quantized_multiplier(v, m, sh)
    return _type_clip(v + out_zp, ctx.out_tensors[0].dtype)
