"""Helpers shared by the reference kernels: activations, padding, quantized arithmetic.

Quantized arithmetic follows TFLite's reference kernels: real multipliers become an int32
fixed-point multiplier and a shift (`quantize_multiplier`), applied with
SaturatingRoundingDoublingHighMul and a rounding right shift
(`multiply_by_quantized_multiplier`), all vectorised in int64.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelError
from ..graph import Quantization, Tensor

#: ActivationFunctionType codes.
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH, ACT_SIGN_BIT = range(6)
ACTIVATION_NAMES = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT")
#: Padding codes.
PADDING_SAME, PADDING_VALID = 0, 1


def apply_activation(x: np.ndarray, act: int) -> np.ndarray:
    """A fused activation on a float array."""
    if act == ACT_NONE:
        return x
    if act == ACT_RELU:
        return np.maximum(x, 0, dtype=x.dtype)
    if act == ACT_RELU6:
        return np.clip(x, 0, 6).astype(x.dtype, copy=False)
    if act == ACT_RELU_N1_TO_1:
        return np.clip(x, -1, 1).astype(x.dtype, copy=False)
    if act == ACT_TANH:
        return np.tanh(x)
    if act == ACT_SIGN_BIT:
        return np.signbit(x).astype(x.dtype)
    raise ModelError(f"unknown fused activation {act}")


def quantized_activation_range(act: int, q: Quantization, dtype: np.dtype) -> tuple[int, int]:
    """Clamp range [lo, hi] of a quantized output for a fused activation (TFLite's
    CalculateActivationRangeQuantized)."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    scale, zp = float(q.scale[0]), int(q.zero_point[0])

    def quant(v: float) -> int:
        return zp + int(round(v / scale))

    if act == ACT_RELU:
        return max(qmin, quant(0.0)), qmax
    if act == ACT_RELU6:
        return max(qmin, quant(0.0)), min(qmax, quant(6.0))
    if act == ACT_RELU_N1_TO_1:
        return max(qmin, quant(-1.0)), min(qmax, quant(1.0))
    if act == ACT_NONE:
        return qmin, qmax
    raise ModelError(f"fused activation {ACTIVATION_NAMES[act]} is not supported on quantized ops")


def same_padding(in_size: int, filter_size: int, stride: int, dilation: int) -> tuple[int, int]:
    """(before, after) padding of TFLite's SAME for one spatial dimension."""
    eff = (filter_size - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = max((out - 1) * stride + eff - in_size, 0)
    return total // 2, total - total // 2


def output_size(in_size: int, filter_size: int, stride: int, dilation: int, padding: int) -> int:
    """Spatial output size for SAME or VALID padding."""
    if stride <= 0 or dilation <= 0:
        raise ModelError(f"stride {stride} and dilation {dilation} must be positive")
    if padding == PADDING_SAME:
        return (in_size + stride - 1) // stride
    eff = (filter_size - 1) * dilation + 1
    return max((in_size - eff + stride) // stride, 0)


def padding_amounts(
    in_size: int, filter_size: int, stride: int, dilation: int, padding: int
) -> tuple[int, int]:
    return (
        same_padding(in_size, filter_size, stride, dilation) if padding == PADDING_SAME else (0, 0)
    )


# -- quantization --------------------------------------------------------------------------


def quant_params(t: Tensor | None, what: str = "tensor") -> Quantization:
    """The quantization of `t`, or ModelError when a quantized kernel needs it and it is absent."""
    if t is None or t.quantization is None:
        name = t.name if t is not None else "?"
        raise ModelError(f"{what} '{name}' is quantized but has no quantization parameters")
    return t.quantization


def dequantize(q: np.ndarray, quant: Quantization) -> np.ndarray:
    """real = scale * (q - zero_point), per tensor or per channel, as float32."""
    shape = quant.broadcast_shape(q.ndim)
    scale = quant.scale.astype(np.float32).reshape(shape)
    zp = quant.zero_point.reshape(shape)
    return ((q.astype(np.int32) - zp.astype(np.int32)).astype(np.float32) * scale).astype(
        np.float32
    )


def quantize(x: np.ndarray, quant: Quantization, dtype: np.dtype) -> np.ndarray:
    """q = clamp(round(x / scale) + zero_point), rounding half away from zero as TFLite."""
    shape = quant.broadcast_shape(x.ndim)
    scale = quant.scale.astype(np.float32).reshape(shape)
    zp = quant.zero_point.reshape(shape)
    q = round_half_away(x.astype(np.float32) / scale).astype(np.int64) + zp
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (std::round), unlike numpy's ties-to-even."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """A real multiplier as (int32 fixed-point multiplier, shift), TFLite's QuantizeMultiplier."""
    if real == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real)
    q = int(round(mantissa * (1 << 31)))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        shift, q = 30, (1 << 31) - 1
    return q, shift


def multiply_by_quantized_multiplier(
    x: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int
) -> np.ndarray:
    """x * multiplier * 2^shift with TFLite's rounding (int64 in, int64 out).

    `multiplier` and `shift` may be arrays broadcasting against `x` (per channel).
    """
    x = np.asarray(x, np.int64)
    multiplier = np.asarray(multiplier, np.int64)
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    a = x * (np.int64(1) << left)
    a = np.clip(a, -(1 << 31), (1 << 31) - 1)  # int32 saturation of the shifted value
    # SaturatingRoundingDoublingHighMul(a, multiplier)
    ab = a * multiplier
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    high = (ab + nudge) // np.int64(1 << 31)
    # C++ integer division truncates toward zero; floor division differs for negatives.
    high = np.where(((ab + nudge) < 0) & (((ab + nudge) % (1 << 31)) != 0), high + 1, high)
    overflow = (a == -(1 << 31)) & (multiplier == -(1 << 31))
    high = np.where(overflow, (1 << 31) - 1, high)
    return rounding_divide_by_pot(high, right)


def c_div(a: np.ndarray, d: int) -> np.ndarray:
    """C++ integer division (toward zero) by a positive constant."""
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)


def high_mul16(a: np.ndarray, b: np.ndarray | int, rounding: bool = True) -> np.ndarray:
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul (or, rounding=False, TFLite's
    SaturatingDoublingHighMul, which truncates), int64 out."""
    ab = np.asarray(a, np.int64) * b
    if rounding:
        ab = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    out = c_div(ab, 1 << 15)
    return np.where((a == -(1 << 15)) & (b == -(1 << 15)), (1 << 15) - 1, out)


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """x / 2^exponent rounded to nearest, ties away from zero (gemmlowp's RoundingDivideByPOT)."""
    x = np.asarray(x, np.int64)
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> exponent) + (remainder > threshold).astype(np.int64)


def requantize(
    acc: np.ndarray,
    real_multiplier: np.ndarray | float,
    out_zero_point: int,
    lo: int,
    hi: int,
    dtype: np.dtype,
) -> np.ndarray:
    """int32 accumulators scaled by `real_multiplier` (per tensor or per channel, broadcast
    on the last axis) into the output's quantized type, clamped to [lo, hi]."""
    reals = np.atleast_1d(np.asarray(real_multiplier, np.float64))
    pairs = [quantize_multiplier(float(r)) for r in reals]
    mult = np.array([p[0] for p in pairs], np.int64)
    shift = np.array([p[1] for p in pairs], np.int64)
    if reals.size == 1:
        mult, shift = mult[0], shift[0]
    out = multiply_by_quantized_multiplier(acc, mult, shift) + out_zero_point
    return np.clip(out, lo, hi).astype(dtype)


# -- quantized linear ops (conv, depthwise, fully connected, matmul) -------------------------


def check_float_or_quantized(op_name: str, x: Tensor, w: Tensor, out: Tensor) -> bool:
    """True for a quantized (int8/uint8) op, False for float32; ModelError for other types."""
    kinds = (x.dtype, w.dtype, out.dtype)
    if all(k == np.float32 for k in kinds):
        return False
    if x.dtype == out.dtype and x.dtype in (np.int8, np.uint8) and w.dtype in (np.int8, np.uint8):
        return True
    raise ModelError(
        f"{op_name}: input {x.dtype.name}, weights {w.dtype.name}, output {out.dtype.name} "
        "is not supported (float32, or int8/uint8 quantized)"
    )


def linear_real_multipliers(x: Tensor, w: Tensor, out: Tensor, channels: int) -> np.ndarray:
    """input_scale * weight_scale / output_scale (float64) per output channel, as TFLite."""
    xs = float(quant_params(x, "input").scale[0])
    os_ = float(quant_params(out, "output").scale[0])
    ws = quant_params(w, "weights").scale.astype(np.float64)
    if ws.size not in (1, channels):
        raise ModelError(f"weights '{w.name}' have {ws.size} scales for {channels} output channels")
    return np.broadcast_to(xs * ws / os_, (channels,))


def requantize_linear(acc: np.ndarray, x: Tensor, w: Tensor, out: Tensor, act: int) -> np.ndarray:
    """int64 accumulators (bias included) of a quantized linear op into its output type,
    per output channel along the last axis, clamped by the fused activation."""
    channels = acc.shape[-1]
    oq = quant_params(out, "output")
    lo, hi = quantized_activation_range(act, oq, out.dtype)
    reals = linear_real_multipliers(x, w, out, channels)
    if np.all(reals == reals[0]):
        reals = reals[:1]
    return requantize(acc, reals, int(oq.zero_point[0]), lo, hi, out.dtype)


def zero_points(t: Tensor, what: str) -> np.ndarray:
    """A quantized tensor's zero point(s) as float64 (one per channel or a single one)."""
    return quant_params(t, what).zero_point.astype(np.float64)


# -- hybrid (dynamic-range) ops: float inputs quantized on the fly ---------------------------


def quantize_rows_symmetric(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row symmetric int8 quantization (values, float32 scales, zero offsets)."""
    rng = np.maximum(np.abs(x2.min(axis=1)), np.abs(x2.max(axis=1))).astype(np.float32)
    zero = rng == 0
    safe = np.where(zero, np.float32(1), rng)
    scale = np.where(zero, np.float32(1), safe / np.float32(127)).astype(np.float32)
    inv = (np.float32(127) / safe).astype(np.float32)
    q = np.clip(round_half_away(x2 * inv[:, None]), -127, 127)
    q[zero] = 0
    return q.astype(np.float64), scale, np.zeros(len(x2))


def quantize_rows_asymmetric(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row asymmetric int8 quantization (values, float32 scales, zero points)."""
    rmin = np.minimum(x2.min(axis=1), 0).astype(np.float64)
    rmax = np.maximum(x2.max(axis=1), 0).astype(np.float64)
    same = rmin == rmax
    scale64 = np.where(same, 1.0, (rmax - rmin) / 255.0)
    from_min, from_max = -128.0 - rmin / scale64, 127.0 - rmax / scale64
    use_min = (128.0 + np.abs(rmin / scale64)) < (127.0 + np.abs(rmax / scale64))
    zp = np.where(use_min, from_min, from_max)
    zp = np.where(zp <= -128, -128, np.where(zp >= 127, 127, round_half_away(zp)))
    zp = np.where(same, 0, zp)
    scale = scale64.astype(np.float32)
    inv = (np.float32(1) / scale).astype(np.float32)
    q = np.clip(round_half_away(zp[:, None].astype(np.float32) + x2 * inv[:, None]), -128, 127)
    q[same] = 0
    return q.astype(np.float64), scale, zp.astype(np.float64)
