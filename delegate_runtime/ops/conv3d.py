"""Volumetric convolutions: CONV_3D and CONV_3D_TRANSPOSE (float32, NDHWC).

CONV_3D takes a DHWIO filter [depth, height, width, in, out]; CONV_3D_TRANSPOSE an
output-shape tensor, a [depth, height, width, out, in] filter and its input, as TFLite
stores them. Both pad as TFLite's ComputePadding3DValues (SAME: the odd cell at the end),
clamp by the fused activation (TANH and SIGN_BIT are ignored, as LiteRT's CPU kernels
do), and run one matmul per filter tap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from .alloc import check_alloc
from .common import PADDING_SAME, PADDING_VALID, apply_activation, output_size, padding_amounts
from .conv import fused_activation
from .registry import OpContext, register

#: Spatial axes (depth, height, width) and the option suffix of each.
AXES = ("d", "h", "w")


@dataclass(frozen=True)
class Geometry3D:
    """Strides, dilations, front paddings and output sizes along depth, height, width."""

    stride: tuple[int, int, int]
    dilation: tuple[int, int, int]
    pad: tuple[int, int, int]
    out: tuple[int, int, int]


def geometry(ctx: OpContext, in_dhw: tuple[int, ...], k_dhw: tuple[int, ...]) -> Geometry3D:
    """The geometry of a 3-D window op over `in_dhw` from its Conv3DOptions."""
    stride = tuple(int(ctx.opt(f"stride_{a}", 0)) for a in AXES)  # schema default 0
    dilation = tuple(int(ctx.opt(f"dilation_{a}_factor", 1)) for a in AXES)
    padding = int(ctx.opt("padding", PADDING_SAME))
    if padding not in (PADDING_SAME, PADDING_VALID):
        raise ModelError(f"{ctx.op.describe()}: padding {padding} is not SAME or VALID")
    if min(stride) <= 0 or min(dilation) <= 0:
        raise ModelError(
            f"{ctx.op.describe()}: strides {list(stride)} and dilations {list(dilation)} "
            "must be positive"
        )
    dims = list(zip(in_dhw, k_dhw, stride, dilation, strict=True))
    out = tuple(output_size(i, k, s, d, padding) for i, k, s, d in dims)
    pad = tuple(
        padding_amounts(i, k, s, d, padding)[0] if o > 0 else 0
        for (i, k, s, d), o in zip(dims, out, strict=True)
    )
    return Geometry3D(stride, dilation, pad, out)  # type: ignore[arg-type]


def _float_inputs(ctx: OpContext, positions: tuple[int, ...]) -> None:
    for i in positions:
        x = ctx.input(i)
        if x is not None and x.dtype != np.float32:
            raise ModelError(
                f"{ctx.op.describe()}: input {i} is {x.dtype.name}; only float32 is supported"
            )


def _bias(ctx: OpContext, position: int, channels: int) -> np.ndarray | None:
    bias = ctx.input(position)
    if bias is not None and bias.size != channels:
        raise ModelError(
            f"{ctx.op.describe()}: bias has {bias.size} values for {channels} output channels"
        )
    return None if bias is None else bias.reshape(-1)


def _tap(origin: int, k: int, g: Geometry3D, axis: int, count: int) -> slice:
    """The slice of a padded axis that filter tap `k` reads for `count` outputs."""
    start = origin + k * g.dilation[axis]
    return slice(start, start + (count - 1) * g.stride[axis] + 1, g.stride[axis])


@register("CONV_3D", versions=(1,))
def conv_3d(ctx: OpContext) -> np.ndarray:
    """3-D convolution: out[n, d, h, w, o] = sum over taps and input channels of
    x[n, d*sd - pd + kd*dd, ...] * w[kd, kh, kw, i, o], plus bias, clamped."""
    if len(ctx.inputs) not in (2, 3):
        raise ModelError(f"{ctx.op.describe()}: takes 2 or 3 inputs, got {len(ctx.inputs)}")
    _float_inputs(ctx, (0, 1, 2))
    x, w = ctx.input(0), ctx.input(1)
    if x is None or w is None or x.ndim != 5 or w.ndim != 5:
        raise ModelError(f"{ctx.op.describe()}: input and filter must have rank 5")
    if x.shape[4] != w.shape[3] or min(w.shape) <= 0 or min(x.shape[1:]) <= 0:
        raise ModelError(
            f"{ctx.op.describe()}: input {list(x.shape)} does not fit filter {list(w.shape)} "
            "(filter [depth, height, width, in, out], in = the input's channels)"
        )
    bias = _bias(ctx, 2, w.shape[4])
    act = fused_activation(ctx)
    g = geometry(ctx, x.shape[1:4], w.shape[:3])
    out_shape = (x.shape[0], *g.out, w.shape[4])
    check_alloc(out_shape, np.float32, f"{ctx.op.describe()}: output")
    # Zero-pad so that every tap of every output reads inside the array.
    pads = [(0, 0)]
    for a in range(3):
        reach = (g.out[a] - 1) * g.stride[a] - g.pad[a] + (w.shape[a] - 1) * g.dilation[a]
        pads.append((g.pad[a], max(reach - (x.shape[a + 1] - 1), 0)))
    pads.append((0, 0))
    check_alloc([x.shape[i] + sum(p) for i, p in enumerate(pads)], np.float32, ctx.op.describe())
    xp = np.pad(x, pads)
    acc = np.zeros(out_shape, np.float32)
    if min(out_shape) > 0:
        for kd in range(w.shape[0]):
            for kh in range(w.shape[1]):
                for kw in range(w.shape[2]):
                    window = xp[
                        :,
                        _tap(0, kd, g, 0, g.out[0]),
                        _tap(0, kh, g, 1, g.out[1]),
                        _tap(0, kw, g, 2, g.out[2]),
                    ]
                    acc += window @ w[kd, kh, kw]
    if bias is not None:
        acc += bias
    return apply_activation(acc, act)


@register("CONV_3D_TRANSPOSE", versions=(1,))
def conv_3d_transpose(ctx: OpContext) -> np.ndarray:
    """The gradient of CONV_3D: each input cell adds x * w[kd, kh, kw, :, i] to the output
    cells it reaches; the output shape is input 0, the input is input 2."""
    if len(ctx.inputs) not in (3, 4):
        raise ModelError(f"{ctx.op.describe()}: takes 3 or 4 inputs, got {len(ctx.inputs)}")
    _float_inputs(ctx, (1, 2, 3))
    shape_t, w, x = ctx.input(0), ctx.input(1), ctx.input(2)
    if shape_t is None or shape_t.ndim != 1 or shape_t.size != 5 or shape_t.dtype != np.int32:
        raise ModelError(f"{ctx.op.describe()}: the output shape must be 5 int32 values")
    if w is None or x is None or w.ndim != 5 or x.ndim != 5:
        raise ModelError(f"{ctx.op.describe()}: input and filter must have rank 5")
    out_shape = tuple(int(v) for v in shape_t)
    if min(out_shape) < 0:
        raise ModelError(f"{ctx.op.describe()}: output shape {list(out_shape)} is negative")
    if x.shape[4] != w.shape[4] or out_shape[0] != x.shape[0] or out_shape[4] != w.shape[3]:
        raise ModelError(
            f"{ctx.op.describe()}: output shape {list(out_shape)}, filter {list(w.shape)} "
            f"(filter [depth, height, width, out, in]) and input {list(x.shape)} disagree"
        )
    bias = _bias(ctx, 3, w.shape[3])
    act = fused_activation(ctx)
    g = geometry(ctx, out_shape[1:4], w.shape[:3])
    if g.out != tuple(x.shape[1:4]):
        raise ModelError(
            f"{ctx.op.describe()}: output shape {list(out_shape)} convolved with this filter "
            f"gives spatial size {list(g.out)}, not the input's {list(x.shape[1:4])}"
        )
    check_alloc(out_shape, np.float32, f"{ctx.op.describe()}: output")
    # Scatter into a buffer indexed from the first padded cell, then crop.
    full = [
        max((x.shape[a + 1] - 1) * g.stride[a] + (w.shape[a] - 1) * g.dilation[a] + 1,
            g.pad[a] + out_shape[a + 1])
        for a in range(3)
    ]  # fmt: skip
    buf_shape = (x.shape[0], *full, w.shape[3])
    check_alloc(buf_shape, np.float32, f"{ctx.op.describe()}: scatter buffer")
    buf = np.zeros(buf_shape, np.float32)
    if x.size and w.size:
        for kd in range(w.shape[0]):
            for kh in range(w.shape[1]):
                for kw in range(w.shape[2]):
                    contrib = x @ w[kd, kh, kw].T
                    buf[
                        :,
                        _tap(0, kd, g, 0, x.shape[1]),
                        _tap(0, kh, g, 1, x.shape[2]),
                        _tap(0, kw, g, 2, x.shape[3]),
                    ] += contrib
    p = g.pad
    out = buf[
        :,
        p[0] : p[0] + out_shape[1],
        p[1] : p[1] + out_shape[2],
        p[2] : p[2] + out_shape[3],
    ]
    if bias is not None:
        out = out + bias
    return apply_activation(np.ascontiguousarray(out, np.float32), act)
