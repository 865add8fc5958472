"""Convolutions: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV (NHWC): float32, int8/uint8,
and hybrid (float activations, int8 weights).

Float kernels run in float32 on BLAS (im2col by strided views, one matmul per group).
Quantized kernels accumulate (q - zero_point) products exactly in float64, add the int32
bias and requantize with TFLite's fixed-point multipliers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import ModelError
from ..graph import Tensor
from .alloc import check_alloc
from .common import (
    ACT_NONE,
    ACT_RELU,
    ACT_RELU6,
    ACT_RELU_N1_TO_1,
    ACT_SIGN_BIT,
    check_float_or_quantized,
    output_size,
    padding_amounts,
    quant_params,
    quantize_rows_asymmetric,
    quantize_rows_symmetric,
    requantize_linear,
    zero_points,
)
from .registry import OpContext, register


def fused_activation(ctx: OpContext, clamps_only: bool = False) -> int:
    """The fused activation TFLite's CPU kernels apply for the op's option.

    clamps_only: the op rejects activations other than NONE/RELU/RELU_N1_TO_1/RELU6.
    """
    act = int(ctx.opt("fused_activation_function", ACT_NONE))
    clamps = (ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1)
    if not 0 <= act <= ACT_SIGN_BIT or (clamps_only and act not in clamps):
        raise ModelError(f"{ctx.op.describe()}: fused activation {act} is not supported")
    # NOTE: LiteRT's conv, depthwise, FC and pooling kernels only clamp (CalculateActivation-
    # Range): a fused TANH or SIGN_BIT is ignored there, though the GPU delegate applies TANH.
    return act if act in (ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1) else ACT_NONE


@dataclass(frozen=True)
class Geometry:
    """Spatial parameters of a 2-D window op: strides, dilations, paddings, output size."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad_h: tuple[int, int]
    pad_w: tuple[int, int]
    out_hw: tuple[int, int]

    @property
    def padded(self) -> bool:
        return any(self.pad_h) or any(self.pad_w)


def window_geometry(ctx: OpContext, in_hw: tuple[int, ...], k_hw: tuple[int, ...]) -> Geometry:
    """The geometry of a conv-like op from its options (stride, dilation, padding)."""
    stride = (int(ctx.opt("stride_h", 1)), int(ctx.opt("stride_w", 1)))
    dilation = (int(ctx.opt("dilation_h_factor", 1)), int(ctx.opt("dilation_w_factor", 1)))
    padding = int(ctx.opt("padding", 0))
    dims = list(zip(in_hw, k_hw, stride, dilation, strict=True))
    try:
        out = tuple(output_size(i, k, s, d, padding) for i, k, s, d in dims)
    except ModelError as exc:
        raise ModelError(f"{ctx.op.describe()}: {exc}") from exc
    pads = [padding_amounts(i, k, s, d, padding) for i, k, s, d in dims]
    return Geometry(stride, dilation, pads[0], pads[1], (out[0], out[1]))


def pad_nhwc(x: np.ndarray, g: Geometry, value: float = 0.0) -> np.ndarray:
    """`x` padded spatially by the geometry's amounts (no copy when there is none)."""
    if not g.padded:
        return x
    (pt, pb), (pl, pr) = g.pad_h, g.pad_w
    n, h, w, c = x.shape
    out = np.empty((n, h + pt + pb, w + pl + pr, c), x.dtype)
    out[:, :pt] = value
    out[:, pt + h :] = value
    out[:, pt : pt + h, :pl] = value
    out[:, pt : pt + h, pl + w :] = value
    out[:, pt : pt + h, pl : pl + w] = x
    return out


def windows(xp: np.ndarray, k_hw: tuple[int, int], g: Geometry) -> np.ndarray:
    """A read-only (N, OH, OW, KH, KW, C) view of the windows of a padded NHWC array."""
    n, _, _, c = xp.shape
    s0, s1, s2, s3 = xp.strides
    (sh, sw), (dh, dw) = g.stride, g.dilation
    shape = (n, *g.out_hw, *k_hw, c)
    strides = (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3)
    return as_strided(xp, shape, strides, writeable=False)


def tap(xp: np.ndarray, i: int, j: int, g: Geometry) -> np.ndarray:
    """The strided (N, OH, OW, C) slice of padded `xp` under kernel tap (i, j)."""
    (sh, sw), (dh, dw), (oh, ow) = g.stride, g.dilation, g.out_hw
    r, c = i * dh, j * dw
    return xp[:, r : r + (oh - 1) * sh + 1 : sh, c : c + (ow - 1) * sw + 1 : sw, :]


# -- cores (float32 for float ops, float64 of zero-point-corrected values for quantized) ----


def conv_core(x: np.ndarray, w: np.ndarray, g: Geometry) -> np.ndarray:
    """Grouped 2-D convolution of NHWC `x` with OHWI `w`, no bias."""
    cin, cin_g = x.shape[3], w.shape[3]
    groups = cin // cin_g
    if groups == 1:
        return _conv_group(x, w, g)
    step = w.shape[0] // groups
    parts = [
        _conv_group(x[..., k * cin_g : (k + 1) * cin_g], w[k * step : (k + 1) * step], g)
        for k in range(groups)
    ]
    return np.concatenate(parts, axis=3)


def _conv_group(x: np.ndarray, w: np.ndarray, g: Geometry) -> np.ndarray:
    n, cout, (kh, kw) = x.shape[0], w.shape[0], w.shape[1:3]
    oh, ow = g.out_hw
    wmat = w.reshape(cout, -1).T
    if kh == kw == 1 and not g.padded:
        cols = x[
            :,
            : (oh - 1) * g.stride[0] + 1 : g.stride[0],
            : (ow - 1) * g.stride[1] + 1 : g.stride[1],
        ]
        cols = cols.reshape(n * oh * ow, -1)
    else:
        check_alloc((n * oh * ow, kh * kw * x.shape[3]), x.dtype, "convolution im2col buffer")
        cols = windows(pad_nhwc(x, g), (kh, kw), g).reshape(n * oh * ow, -1)
    return (cols @ wmat).reshape(n, oh, ow, cout)


def depthwise_core(x: np.ndarray, w: np.ndarray, multiplier: int, g: Geometry) -> np.ndarray:
    """Depthwise convolution of NHWC `x` with (1, KH, KW, C*M) `w`, no bias."""
    if multiplier > 1:
        x = np.repeat(x, multiplier, axis=3)
    xp = pad_nhwc(x, g)
    (sh, sw), (dh, dw), (oh, ow) = g.stride, g.dilation, g.out_hw
    # Column phases make every tap's (OW, C) rows contiguous, so numpy runs whole rows
    # instead of C-long pieces.
    phases = [xp] if sw == 1 else [np.ascontiguousarray(xp[:, :, p::sw]) for p in range(sw)]
    out = np.empty((x.shape[0], oh, ow, w.shape[3]), x.dtype)
    tmp = np.empty_like(out)
    kh, kw = w.shape[1:3]
    for i in range(kh):
        for j in range(kw):
            col, row = j * dw, i * dh
            src = phases[col % sw][
                :, row : row + (oh - 1) * sh + 1 : sh, col // sw : col // sw + ow
            ]
            weights = np.tile(w[0, i, j], (ow, 1))
            np.multiply(src, weights, out=tmp if i or j else out)
            if i or j:
                out += tmp
    return out


def transpose_conv_core(
    x: np.ndarray,
    w: np.ndarray,
    out_hw: tuple[int, int],
    stride: tuple[int, int],
    pad: tuple[int, int],
) -> np.ndarray:
    """Transposed convolution of NHWC `x` with OHWI `w` into an (out_h, out_w) output."""
    n, h, wd, cin = x.shape
    cout, kh, kw = w.shape[:3]
    (sh, sw), (pt, pl) = stride, pad
    cols = (x.reshape(-1, cin) @ w.reshape(-1, cin).T).reshape(n, h, wd, cout, kh, kw)
    full_h = max((h - 1) * sh + kh, pt + out_hw[0])
    full_w = max((wd - 1) * sw + kw, pl + out_hw[1])
    full = np.zeros((n, full_h, full_w, cout), x.dtype)
    for i in range(kh):
        for j in range(kw):
            full[:, i : i + (h - 1) * sh + 1 : sh, j : j + (wd - 1) * sw + 1 : sw] += cols[
                ..., i, j
            ]
    return full[:, pt : pt + out_hw[0], pl : pl + out_hw[1]]


# -- float / quantized epilogues ----------------------------------------------------------


def _offset(a: np.ndarray, t: Tensor, what: str, channel_axis: int | None = None) -> np.ndarray:
    """Quantized values minus their zero point(s), as float64 (exact)."""
    zp = zero_points(t, what)
    if zp.size > 1 and channel_axis is not None:
        shape = [1] * a.ndim
        shape[channel_axis] = zp.size
        zp = zp.reshape(shape)
    elif zp.size > 1:
        raise ModelError(f"{what} '{t.name}' has per-channel zero points, not supported here")
    else:
        zp = zp[0]
    return a.astype(np.float64) - zp


#: Clamp bounds of the fused activations the CPU kernels apply.
_CLAMPS = {ACT_RELU: (0.0, None), ACT_RELU6: (0.0, 6.0), ACT_RELU_N1_TO_1: (-1.0, 1.0)}


def float_epilogue(acc: np.ndarray, bias: np.ndarray | None, act: int) -> np.ndarray:
    """Bias and fused clamp of a float linear op, in place on a fresh float32 `acc`."""
    acc = acc.astype(np.float32, copy=False)
    if bias is not None:
        acc += bias.astype(np.float32, copy=False)
    if act in _CLAMPS:
        np.clip(acc, *_CLAMPS[act], out=acc)
    return acc


def quant_epilogue(
    acc: np.ndarray, bias: np.ndarray | None, x: Tensor, w: Tensor, out: Tensor, act: int
) -> np.ndarray:
    """Bias and requantization of exact float64 accumulators of a quantized linear op."""
    acc = np.rint(acc).astype(np.int64)
    if bias is not None:
        acc += bias.astype(np.int64)
    return requantize_linear(acc, x, w, out, act)


#: A conv core bound to its geometry: (input, weights) -> accumulators.
CoreFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def is_hybrid(ctx: OpContext) -> bool:
    """Float input and output with int8 weights: dynamic-range quantization."""
    x_t, w_t, out_t = ctx.in_tensors[0], ctx.in_tensors[1], ctx.out_tensors[0]
    return x_t.dtype == np.float32 and w_t.dtype == np.int8 and out_t.dtype == np.float32


def hybrid_epilogue(
    ctx: OpContext, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, core: CoreFn
) -> np.ndarray:
    """A hybrid conv: each batch's float input quantized to int8 on the fly (asymmetric
    for per-channel weights, symmetric otherwise, as TFLite), integer products, float out."""
    w_scale = quant_params(ctx.in_tensors[1], "weights").scale.astype(np.float32)
    quantize = quantize_rows_asymmetric if w_scale.size > 1 else quantize_rows_symmetric
    n = x.shape[0]
    q, scale, offset = quantize(x.reshape(n, -1))
    xq = (q - offset[:, None]).reshape(x.shape)  # padding with 0 is padding with the offset
    acc = core(xq, w.astype(np.float64)).astype(np.float32)
    acc *= w_scale
    acc *= scale.reshape(n, 1, 1, 1)
    return float_epilogue(acc, bias, fused_activation(ctx))


def _check_bias(ctx: OpContext, bias: np.ndarray | None, quantized: bool, channels: int) -> None:
    if bias is None:
        return
    want = np.int32 if quantized else np.float32
    if bias.dtype != want or bias.size != channels:
        raise ModelError(
            f"{ctx.op.describe()}: bias must be {np.dtype(want).name}[{channels}], "
            f"got {bias.dtype.name}{list(bias.shape)}"
        )


def _check_output(ctx: OpContext, shape: tuple[int, ...]) -> None:
    """The output (and accumulator) fits the kernel limits: float64 accumulators cost most."""
    check_alloc(shape, np.float64, f"{ctx.op.describe()}: output")


def _check_rank4(ctx: OpContext, *arrays: np.ndarray) -> None:
    for a in arrays:
        if a.ndim != 4:
            raise ModelError(f"{ctx.op.describe()}: expects 4-D tensors, got shape {list(a.shape)}")


# -- kernels --------------------------------------------------------------------------------


@register("CONV_2D", versions=(1, 2, 3, 5, 6))
def conv_2d(ctx: OpContext) -> np.ndarray:
    """2-D convolution, NHWC input, OHWI filter, optional bias, grouped when I < C."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.input(2)
    x_t, w_t, out_t = ctx.in_tensors[0], ctx.in_tensors[1], ctx.out_tensors[0]
    hybrid = is_hybrid(ctx)
    quantized = not hybrid and check_float_or_quantized(ctx.op.describe(), x_t, w_t, out_t)
    _check_rank4(ctx, x, w)
    if w.shape[3] == 0 or x.shape[3] % w.shape[3] or w.shape[0] % (x.shape[3] // w.shape[3]):
        raise ModelError(
            f"{ctx.op.describe()}: filter {list(w.shape)} does not fit input {list(x.shape)}"
        )
    _check_bias(ctx, bias, quantized, w.shape[0])
    g = window_geometry(ctx, x.shape[1:3], w.shape[1:3])
    _check_output(ctx, (x.shape[0], *g.out_hw, w.shape[0]))
    if hybrid:
        return hybrid_epilogue(ctx, x, w, bias, lambda a, b: conv_core(a, b, g))
    act = fused_activation(ctx)
    if not quantized:
        return float_epilogue(conv_core(x, w, g), bias, act)
    xq = _offset(x, x_t, "input")
    wq = _offset(w, w_t, "weights", channel_axis=0)
    # Zero-point corrected, padding with 0 is padding with the input's zero point.
    return quant_epilogue(conv_core(xq, wq, g), bias, x_t, w_t, out_t, act)


@register("DEPTHWISE_CONV_2D", versions=(1, 2, 3, 6))
def depthwise_conv_2d(ctx: OpContext) -> np.ndarray:
    """Depthwise 2-D convolution: output channel c*M+m filters input channel c."""
    x, w, bias = ctx.inputs[0], ctx.inputs[1], ctx.input(2)
    x_t, w_t, out_t = ctx.in_tensors[0], ctx.in_tensors[1], ctx.out_tensors[0]
    hybrid = is_hybrid(ctx)
    quantized = not hybrid and check_float_or_quantized(ctx.op.describe(), x_t, w_t, out_t)
    _check_rank4(ctx, x, w)
    cin, cout = x.shape[3], w.shape[3]
    if w.shape[0] != 1 or cin == 0 or cout % cin:
        raise ModelError(
            f"{ctx.op.describe()}: filter {list(w.shape)} does not fit input {list(x.shape)}"
        )
    multiplier = cout // cin
    _check_bias(ctx, bias, quantized, cout)
    g = window_geometry(ctx, x.shape[1:3], w.shape[1:3])
    _check_output(ctx, (x.shape[0], *g.out_hw, cout))
    if hybrid:
        if quant_params(w_t, "weights").scale.size != cout:  # as LiteRT
            raise ModelError(f"{ctx.op.describe()}: hybrid weights must be per-channel")
        return hybrid_epilogue(ctx, x, w, bias, lambda a, b: depthwise_core(a, b, multiplier, g))
    act = fused_activation(ctx)
    if not quantized:
        return float_epilogue(depthwise_core(x, w, multiplier, g), bias, act)
    xq = _offset(x, x_t, "input")
    wq = _offset(w, w_t, "weights", channel_axis=3)
    acc = depthwise_core(xq, wq, multiplier, g)
    return quant_epilogue(acc, bias, x_t, w_t, out_t, act)


@register("TRANSPOSE_CONV", versions=(1, 2, 3, 4))
def transpose_conv(ctx: OpContext) -> np.ndarray:
    """Transposed 2-D convolution: inputs output_shape, OHWI filter, input, optional bias."""
    shape, w, x, bias = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.input(3)
    w_t, x_t, out_t = ctx.in_tensors[1], ctx.in_tensors[2], ctx.out_tensors[0]
    quantized = check_float_or_quantized(ctx.op.describe(), x_t, w_t, out_t)
    _check_rank4(ctx, x, w)
    out_shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
    if len(out_shape) != 4 or out_shape[0] != x.shape[0] or out_shape[3] != w.shape[0]:
        raise ModelError(f"{ctx.op.describe()}: output_shape {list(out_shape)} does not fit")
    if w.shape[3] != x.shape[3]:
        raise ModelError(
            f"{ctx.op.describe()}: filter {list(w.shape)} does not fit input {list(x.shape)}"
        )
    _check_bias(ctx, bias, quantized, w.shape[0])
    if min(out_shape) < 0:
        raise ModelError(f"{ctx.op.describe()}: output_shape {list(out_shape)} is negative")
    # Padding is that of the forward conv mapping the output back onto the input.
    g = window_geometry(ctx, out_shape[1:3], w.shape[1:3])
    if g.out_hw != x.shape[1:3]:  # as LiteRT: the forward conv must give the input's size
        raise ModelError(
            f"{ctx.op.describe()}: output_shape {list(out_shape)} maps back to "
            f"{list(g.out_hw)}, not the input's {list(x.shape[1:3])}"
        )
    _check_output(ctx, out_shape)
    pad = (g.pad_h[0], g.pad_w[0])
    act = fused_activation(ctx)
    if not quantized:
        acc = transpose_conv_core(x, w, out_shape[1:3], g.stride, pad)
        return float_epilogue(acc, bias, act)
    xq = _offset(x, x_t, "input")
    wq = _offset(w, w_t, "weights", channel_axis=0)
    acc = transpose_conv_core(xq, wq, out_shape[1:3], g.stride, pad)
    return quant_epilogue(acc, bias, x_t, w_t, out_t, act)
