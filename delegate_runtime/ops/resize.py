"""Image resize ops on NHWC tensors: RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR.

They follow TFLite's reference kernels: float32 coordinate arithmetic in the same order,
the integer-only (10-bit fixed point) bilinear kernel for int8/int16, and the float kernel
with a +0.5 rounding offset for uint8. Nearest neighbour only picks values, so quantized
tensors pass through.
"""

from __future__ import annotations

import numpy as np

from .registry import OpContext, register
from .shape import check_output, data_input, index_values, op_error

_f32 = np.float32
BILINEAR_TYPES = (np.float32, np.uint8, np.int8, np.int16)
NEAREST_TYPES = (np.float32, np.uint8, np.int8, np.int16)
#: Fixed-point fraction bits of the integer bilinear kernel.
FRAC_BITS = 10


def _input_and_size(
    ctx: OpContext, allowed: tuple, smallest: int = 1
) -> tuple[np.ndarray, int, int]:
    """The input and the output (height, width), each at least `smallest`."""
    x = data_input(ctx, 0, allowed)
    if x.ndim != 4:
        raise op_error(ctx, f"input must be 4-D NHWC, got shape {list(x.shape)}")
    size = index_values(ctx, 1, "size").reshape(-1)
    if size.size != 2 or np.any(size < smallest):
        raise op_error(ctx, f"size must be two values >= {smallest}, got {size.tolist()}")
    oh, ow = int(size[0]), int(size[1])
    check_output(ctx, (x.shape[0], oh, ow, x.shape[3]), x.dtype)
    return x, oh, ow


def _float_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if out_size == 0:
        return _f32(0)  # no output position uses it
    if align_corners and out_size > 1:
        return _f32(in_size - 1) / _f32(out_size - 1)
    return _f32(in_size) / _f32(out_size)


def _cdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C integer division (truncates toward zero)."""
    return np.sign(a) * (np.abs(a) // b)


# -- bilinear --------------------------------------------------------------------------------


def _float_coords(
    out_size: int, in_size: int, align: bool, half_pixel: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scaled coordinate, lower index, upper index) per output position, TFLite's
    ComputeInterpolationValues."""
    scale = _float_scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=_f32)
    scaled = (v + _f32(0.5)) * scale - _f32(0.5) if half_pixel else v * scale
    lower = np.maximum(np.floor(scaled).astype(np.int64), 0)
    upper = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    return scaled.astype(_f32), lower, upper


def _bilinear_float(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    iy, y0, y1 = _float_coords(oh, x.shape[1], align, half)
    ix, x0, x1 = _float_coords(ow, x.shape[2], align, half)
    dy = (iy - y0.astype(_f32))[:, None, None]
    dx = (ix - x0.astype(_f32))[:, None]
    one = _f32(1)
    xf = x.astype(_f32)

    def at(ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        return xf[:, ys[:, None], xs[None, :], :]

    out = (
        at(y0, x0) * (one - dy) * (one - dx)
        + at(y1, x0) * dy * (one - dx)
        + at(y0, x1) * (one - dy) * dx
        + at(y1, x1) * dy * dx
    )
    if x.dtype == np.float32:
        return out.astype(_f32)
    info = np.iinfo(x.dtype)  # integer T: static_cast<T>(value + 0.5f)
    return np.clip(np.trunc(out + _f32(0.5)), info.min, info.max).astype(x.dtype)


def _int_coords(
    out_size: int, in_size: int, align: bool, half_pixel: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ComputeInterpolationValuesInteger: 10-bit fixed-point coordinates and bounds."""
    one = 1 << FRAC_BITS
    if align and out_size > 1:
        scale = (one * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = (one * in_size + out_size // 2) // out_size
    v = np.arange(out_size, dtype=np.int64)
    scaled = v * scale + (scale // 2 - (one >> 1) if half_pixel else 0)
    lower = np.maximum(_cdiv(scaled, one), 0)
    upper = np.minimum(_cdiv(scaled + one - 1, one), in_size - 1)
    return scaled, lower, upper


def _bilinear_integer(x: np.ndarray, oh: int, ow: int, align: bool, half: bool) -> np.ndarray:
    one = 1 << FRAC_BITS
    iy, y0, y1 = _int_coords(oh, x.shape[1], align, half)
    ix, x0, x1 = _int_coords(ow, x.shape[2], align, half)
    wy1 = (iy - one * y0)[:, None, None]
    wx1 = (ix - one * x0)[:, None]
    wy0, wx0 = one - wy1, one - wx1
    xi = x.astype(np.int64)

    def at(ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        return xi[:, ys[:, None], xs[None, :], :]

    acc = (
        at(y0, x0) * wy0 * wx0
        + at(y1, x0) * wy1 * wx0
        + at(y0, x1) * wy0 * wx1
        + at(y1, x1) * wy1 * wx1
    )
    half_unit = 1 << (2 * FRAC_BITS - 1)
    rounded = _cdiv(acc + np.where(acc > 0, half_unit, -half_unit), 1 << (2 * FRAC_BITS))
    info = np.iinfo(x.dtype)
    return np.clip(rounded, info.min, info.max).astype(x.dtype)


@register("RESIZE_BILINEAR", versions=(1, 2, 3, 4))
def resize_bilinear(ctx: OpContext) -> np.ndarray:
    """RESIZE_BILINEAR with align_corners / half_pixel_centers; float32, uint8, int8, int16."""
    x, oh, ow = _input_and_size(ctx, BILINEAR_TYPES)
    align = bool(ctx.opt("align_corners", False))
    half = bool(ctx.opt("half_pixel_centers", False))
    if align and half:
        raise op_error(ctx, "align_corners and half_pixel_centers cannot both be set")
    if x.dtype in (np.int8, np.int16):
        return _bilinear_integer(x, oh, ow, align, half)
    return _bilinear_float(x, oh, ow, align, half)


# -- nearest neighbour -----------------------------------------------------------------------


def _nearest_index(out_size: int, in_size: int, align: bool, half_pixel: bool) -> np.ndarray:
    """TFLite's GetNearestNeighbor for every output position."""
    scale = _float_scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=_f32) + (_f32(0.5) if half_pixel else _f32(0))
    scaled = (v * scale).astype(_f32)
    picked = np.floor(scaled)
    if align:  # std::round; scaled >= 0 here, and scaled - floor is exact
        picked = picked + (scaled - picked >= _f32(0.5))
    index = np.minimum(picked.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half_pixel else index


@register("RESIZE_NEAREST_NEIGHBOR", versions=(1, 2, 3, 4))
def resize_nearest_neighbor(ctx: OpContext) -> np.ndarray:
    """RESIZE_NEAREST_NEIGHBOR with align_corners / half_pixel_centers; a size of 0 gives
    an empty output, as LiteRT (RESIZE_BILINEAR refuses it)."""
    x, oh, ow = _input_and_size(ctx, NEAREST_TYPES, smallest=0)
    align = bool(ctx.opt("align_corners", False))
    half = bool(ctx.opt("half_pixel_centers", False))
    ys = _nearest_index(oh, x.shape[1], align, half)
    xs = _nearest_index(ow, x.shape[2], align, half)
    return x[:, ys[:, None], xs[None, :], :]
