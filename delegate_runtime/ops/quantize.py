"""QUANTIZE and DEQUANTIZE: float <-> integer, integer requantization, fp16 constants."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..graph import Quantization
from .common import dequantize as dequantize_array
from .common import (
    multiply_by_quantized_multiplier,
    quant_params,
    quantize_multiplier,
    round_half_away,
)
from .common import quantize as quantize_half_away
from .elementwise import unsupported
from .registry import OpContext, register

F32 = np.dtype(np.float32)
#: Integer types QUANTIZE writes and DEQUANTIZE reads.
QUANT_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def _input(ctx: OpContext) -> np.ndarray:
    x = ctx.input(0)
    if x is None:
        raise ModelError(f"{ctx.op.describe()}: missing input")
    return x


def quantize_per_tensor(x: np.ndarray, quant: Quantization, dtype: np.dtype) -> np.ndarray:
    """Per-tensor q = clamp(round(x / scale) + zero_point) with ties away from zero, as
    LiteRT's reference kernel (AffineQuantize, TfLiteRound); its builtin x86 and XNNPACK
    kernels round ties to even."""
    with np.errstate(invalid="ignore"):
        q = round_half_away(x.astype(np.float32) / np.float32(quant.scale[0]))
    info = np.iinfo(dtype)
    q = np.clip(np.nan_to_num(q), -(2**31), 2**31).astype(np.int64) + int(quant.zero_point[0])
    return np.clip(q, info.min, info.max).astype(dtype)


def _requantize(ctx: OpContext, q: np.ndarray) -> np.ndarray:
    """Integer to integer: (q - zp_in) * s_in/s_out + zp_out in fixed point (TFLite's
    Requantize), per tensor."""
    qi = quant_params(ctx.in_tensors[0], "input")
    qo = quant_params(ctx.out_tensors[0], "output")
    if qi.per_channel or qo.per_channel:
        raise ModelError(f"{ctx.op.describe()}: per-channel requantization is not supported")
    m, sh = quantize_multiplier(float(qi.scale[0]) / float(qo.scale[0]))
    raw = multiply_by_quantized_multiplier(q.astype(np.int64) - int(qi.zero_point[0]), m, sh)
    out_dtype = ctx.out_tensors[0].dtype
    info = np.iinfo(out_dtype)
    return np.clip(raw + int(qo.zero_point[0]), info.min, info.max).astype(out_dtype)


@register("QUANTIZE", versions=(1, 2, 3))
def quantize(ctx: OpContext) -> np.ndarray:
    """float32 -> int8/uint8/int16 (per tensor or per channel), or requantize integers."""
    x = _input(ctx)
    out = ctx.out_tensors[0]
    if out.dtype not in QUANT_TYPES:
        raise unsupported(ctx, out.dtype)
    if x.dtype == F32:
        q = quant_params(out, "output")
        if q.per_channel:
            return quantize_half_away(x, q, out.dtype)
        return quantize_per_tensor(x, q, out.dtype)
    if x.dtype in QUANT_TYPES:
        return _requantize(ctx, x)
    raise unsupported(ctx, x.dtype)


@register("DEQUANTIZE", versions=(1, 2, 3, 4, 5))
def dequantize(ctx: OpContext) -> np.ndarray:
    """int8/uint8/int16 (per tensor or per channel) or float16 -> float32."""
    x = _input(ctx)
    if ctx.out_tensors[0].dtype != F32:
        raise unsupported(ctx, ctx.out_tensors[0].dtype)
    if x.dtype == np.float16:
        return x.astype(F32)
    if x.dtype in QUANT_TYPES:
        return dequantize_array(x, quant_params(ctx.in_tensors[0], "input"))
    raise unsupported(ctx, x.dtype)
