"""Slicing and padding ops: STRIDED_SLICE, SLICE, SPLIT, SPLIT_V, PAD, PADV2, MIRROR_PAD.

Values pass through unchanged, quantized ones included; quantized PAD fills with the
output's zero point, as TFLite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import quant_params
from .registry import OpContext, register
from .shape import (
    DATA_TYPES,
    check_output,
    data_input,
    index_values,
    is_quantized,
    normalize_axis,
    op_error,
    scalar_value,
)

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
#: STRIDED_SLICE handles at most this many dimensions, added axes included (TFLite).
MAX_SLICE_DIMS = 5


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


# -- strided slice ---------------------------------------------------------------------------


@dataclass
class _Axis:
    """One dimension of the effective (new axes added) input: its spec after the masks."""

    size: int
    begin: int = 0
    end: int = 0
    stride: int = 1
    begin_masked: bool = True
    end_masked: bool = True
    shrink: bool = False


def _effective_axes(
    ctx: OpContext, shape: tuple[int, ...], begin: list[int], end: list[int], strides: list[int]
) -> list[_Axis]:
    """Expand the ellipsis and new axes into one spec per effective dimension, following
    TFLite's BuildStridedSliceParams."""
    ellipsis, new_axis = int(ctx.opt("ellipsis_mask", 0)), int(ctx.opt("new_axis_mask", 0))
    begin_mask, end_mask = int(ctx.opt("begin_mask", 0)), int(ctx.opt("end_mask", 0))
    shrink_mask = int(ctx.opt("shrink_axis_mask", 0))
    count, rank = len(begin), len(shape)
    added = sum(1 for i in range(count) if _bit(new_axis, i) and not _bit(ellipsis, i))
    dims = rank + added
    if dims > MAX_SLICE_DIMS:
        raise op_error(ctx, f"{dims} dimensions with added axes; at most {MAX_SLICE_DIMS}")
    # Which effective dims the ellipsis covers and which are new axes.
    eff_ellipsis, eff_new, ellipsis_start, expanded, i = set(), set(), dims, 0, 0
    while i < dims:
        if _bit(ellipsis, i):
            ellipsis_start = i
            stop = max(i + 1, min(i + 1 + added + rank - count, dims))
            expanded = stop - i - 1
            eff_ellipsis.update(range(i, stop))
            i = stop
            continue
        if _bit(new_axis, i - expanded):
            eff_new.add(i)
        i += 1
    axes, added_axes, added_ellipsis = [], 0, 0
    for i in range(dims):
        if i in eff_ellipsis:
            added_ellipsis = max(0, i - ellipsis_start)
            axes.append(_Axis(shape[i - added_axes]))
        elif i in eff_new:
            axes.append(_Axis(1, 0, 1, 1, False, False))
            added_axes += 1
        elif i >= count + expanded:
            axes.append(_Axis(shape[i - added_axes]))
        else:
            j = i - added_ellipsis
            axes.append(
                _Axis(
                    shape[i - added_axes],
                    begin[j],
                    end[j],
                    strides[j],
                    _bit(begin_mask, j),
                    _bit(end_mask, j),
                    _bit(shrink_mask, j),
                )
            )
    return axes


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(v, hi))


def _start(a: _Axis) -> int:
    """TFLite's StartForAxis."""
    if a.size == 0:
        return 0
    start = a.begin
    if a.begin_masked:
        start = INT32_MIN if a.stride > 0 else INT32_MAX
    if start < 0:
        start += a.size
    return _clamp(start, 0, a.size) if a.stride > 0 else _clamp(start, -1, a.size - 1)


def _stop(a: _Axis, start: int, offset: bool) -> int:
    """TFLite's StopForAxis (offset: end counts from begin)."""
    if a.size == 0:
        return 0
    if a.shrink:
        return start + 1
    stop = a.end
    if a.end_masked:
        stop = INT32_MAX if a.stride > 0 else INT32_MIN
    elif offset:
        stop += start
    if stop < 0:
        stop += a.size
    return _clamp(stop, 0, a.size) if a.stride > 0 else _clamp(stop, -1, a.size - 1)


@register("STRIDED_SLICE", versions=(1, 2, 3, 4, 5, 6, 7, 8))
def strided_slice(ctx: OpContext) -> np.ndarray:
    """STRIDED_SLICE with begin/end/ellipsis/new_axis/shrink_axis masks, negative strides
    and `offset` (end relative to begin)."""
    x = data_input(ctx)
    begin, end, strides = (
        [int(v) for v in index_values(ctx, i, what, (np.int32,)).reshape(-1)]
        for i, what in ((1, "begin"), (2, "end"), (3, "strides"))
    )
    if not len(begin) == len(end) == len(strides):
        raise op_error(ctx, "begin, end and strides differ in length")
    if any(s == 0 for s in strides):
        raise op_error(ctx, "strides must be non-zero")
    axes = _effective_axes(ctx, x.shape, begin, end, strides)
    offset = bool(ctx.opt("offset", False))
    picks, out_shape = [], []
    for a in axes:
        start = _start(a)
        stop = _stop(a, start, offset)
        picks.append(np.arange(start, stop, a.stride, dtype=np.int64))
        if not a.shrink:
            out_shape.append(len(picks[-1]))
    if any(p.size and (p.min() < 0 or p.max() >= a.size) for p, a in zip(picks, axes, strict=True)):
        raise op_error(ctx, "a shrunk axis index is out of range")
    effective = x.reshape(tuple(a.size for a in axes))
    return effective[np.ix_(*picks)].reshape(out_shape)


# -- slice, split ----------------------------------------------------------------------------


@register("SLICE", versions=range(1, 9))
def slice_(ctx: OpContext) -> np.ndarray:
    """SLICE: `size[i]` elements from `begin[i]` (size -1: to the end)."""
    x = data_input(ctx)
    begin = index_values(ctx, 1, "begin").reshape(-1).tolist()
    size = index_values(ctx, 2, "size").reshape(-1).tolist()
    if not len(begin) == len(size) == x.ndim:
        raise op_error(ctx, f"begin and size must have {x.ndim} values")
    index = []
    for b, s, dim in zip(begin, size, x.shape, strict=True):
        s = dim - b if s == -1 else s
        if b < 0 or s < 0 or b + s > dim:
            raise op_error(ctx, f"begin {begin} and size {size} do not fit shape {list(x.shape)}")
        index.append(slice(b, b + s))
    return x[tuple(index)].copy()


@register("SPLIT", versions=range(1, 6))
def split(ctx: OpContext) -> list[np.ndarray]:
    """SPLIT: `num_splits` equal parts along axis (input 0) of input 1."""
    x = data_input(ctx, 1)
    axis = normalize_axis(ctx, scalar_value(ctx, 0, "axis"), x.ndim)
    parts = len(ctx.out_tensors)
    if x.shape[axis] % parts:
        raise op_error(ctx, f"axis size {x.shape[axis]} does not split into {parts} equal parts")
    return np.split(x, parts, axis=axis)


@register("SPLIT_V", versions=(1, 2, 3))
def split_v(ctx: OpContext) -> list[np.ndarray]:
    """SPLIT_V: parts of the sizes in input 1 (one may be -1) along axis (input 2)."""
    x = data_input(ctx)
    sizes = index_values(ctx, 1, "size_splits").reshape(-1).tolist()
    axis = normalize_axis(ctx, scalar_value(ctx, 2, "axis"), x.ndim)
    dim = x.shape[axis]
    if len(sizes) != len(ctx.out_tensors) or sizes.count(-1) > 1:
        raise op_error(ctx, f"size_splits {sizes} do not fit {len(ctx.out_tensors)} outputs")
    if -1 in sizes:
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise op_error(ctx, f"size_splits {sizes} do not add up to axis size {dim}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


# -- padding ---------------------------------------------------------------------------------


def _paddings(ctx: OpContext, rank: int) -> list[tuple[int, int]]:
    pads = index_values(ctx, 1, "paddings")
    if pads.shape != (rank, 2):
        raise op_error(ctx, f"paddings shape {list(pads.shape)} is not [{rank}, 2]")
    if np.any(pads < 0):
        raise op_error(ctx, f"paddings {pads.tolist()} must not be negative")
    return [(int(a), int(b)) for a, b in pads]


def _pad_value(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """PADV2's constant (its raw value, quantized ones included), else zero or the output's
    zero point."""
    value = ctx.input(2)
    if value is not None:
        if value.size != 1 or value.dtype != x.dtype:
            raise op_error(ctx, "the pad value must be a scalar of the input's type")
        return value.reshape(())
    if is_quantized(ctx, 0, output=True):
        return np.array(quant_params(ctx.out_tensors[0]).zero_point[0], dtype=x.dtype)
    return np.zeros((), x.dtype)


def _padded_shape(x: np.ndarray, pads: list[tuple[int, int]]) -> list[int]:
    return [a + d + b for d, (a, b) in zip(x.shape, pads, strict=True)]


def _pad(ctx: OpContext) -> np.ndarray:
    x = data_input(ctx)
    pads = _paddings(ctx, x.ndim)
    check_output(ctx, _padded_shape(x, pads), x.dtype)
    return np.pad(x, pads, mode="constant", constant_values=_pad_value(ctx, x))


@register("PAD", versions=range(1, 7))
def pad(ctx: OpContext) -> np.ndarray:
    """PAD with zeros (the zero point when quantized)."""
    return _pad(ctx)


@register("PADV2", versions=range(1, 7))
def pad_v2(ctx: OpContext) -> np.ndarray:
    """PADV2 with the constant in input 2."""
    return _pad(ctx)


#: MirrorPadMode codes and their numpy modes.
MIRROR_MODES = {0: "reflect", 1: "symmetric"}


@register("MIRROR_PAD", versions=(1, 2, 3))
def mirror_pad(ctx: OpContext) -> np.ndarray:
    """MIRROR_PAD: REFLECT (edge not repeated) or SYMMETRIC (edge repeated)."""
    x = data_input(ctx, 0, DATA_TYPES - {np.dtype(np.bool_)})
    pads = _paddings(ctx, x.ndim)
    mode = MIRROR_MODES.get(int(ctx.opt("mode", 0)))
    if mode is None:
        raise op_error(ctx, f"unknown mirror pad mode {ctx.opt('mode')}")
    extra = 1 if mode == "reflect" else 0
    for (a, b), dim in zip(pads, x.shape, strict=True):
        if max(a, b) > dim - extra:
            raise op_error(ctx, f"paddings {pads} are too large for shape {list(x.shape)}")
    check_output(ctx, _padded_shape(x, pads), x.dtype)
    return np.pad(x, pads, mode=mode)
