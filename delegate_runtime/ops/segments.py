"""Segment reductions: SEGMENT_SUM and the UNSORTED_SEGMENT_* family.

Rows of `data` are combined into the output row their segment id names, in order
(float32 sums accumulate row after row, int32 arithmetic wraps, as TFLite's kernels).
The number of output rows comes from the ids (SEGMENT_SUM) or from num_segments
(UNSORTED_*): both are checked against the kernel limits before allocating.
"""

from __future__ import annotations

import numpy as np

from .registry import OpContext, register
from .shape import check_output, data_input, op_error, require_dtype, required_input

_dt = np.dtype
#: Element types of the segment ops' data.
SEGMENT_TYPES = frozenset((_dt(np.float32), _dt(np.int32)))
I32 = frozenset((_dt(np.int32),))


def _segment_ids(ctx: OpContext) -> np.ndarray:
    ids = required_input(ctx, 1, "segment_ids")
    require_dtype(ctx, ids, I32, "segment_ids")
    return ids.astype(np.int64)


def _reduce_into(out: np.ndarray, ids: np.ndarray, data: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """`out` [segments, ...] with each data row folded by `ufunc` into row ids[i], in order
    (rows of a negative id are skipped)."""
    rows = data.reshape((ids.size,) + out.shape[1:])
    keep = ids >= 0
    ufunc.at(out, ids[keep], rows[keep])
    return out


@register("SEGMENT_SUM", versions=(1,))
def segment_sum(ctx: OpContext) -> np.ndarray:
    """SEGMENT_SUM: sums of the rows of `data` sharing a segment id; the ids are sorted,
    start at 0 and step by 0 or 1, so the output has last id + 1 rows."""
    data = data_input(ctx, 0, SEGMENT_TYPES)
    ids = _segment_ids(ctx)
    if data.ndim < 1 or ids.ndim != 1 or ids.size != data.shape[0]:
        raise op_error(
            ctx, f"segment_ids {list(ids.shape)} must be a vector as long as data's first dim"
        )
    if ids.size and (ids[0] != 0 or np.any((np.diff(ids) != 0) & (np.diff(ids) != 1))):
        raise op_error(
            ctx, f"segment_ids {ids.tolist()} must start at 0 and grow by 0 or 1 (sorted, no gaps)"
        )
    rows = int(ids[-1]) + 1 if ids.size else 0
    shape = (rows,) + data.shape[1:]
    check_output(ctx, shape, data.dtype)
    return _reduce_into(np.zeros(shape, data.dtype), ids, data, np.add)


def _initial(kind: str, dtype: np.dtype) -> float | int:
    """The value of an empty segment: the reduction's identity (the lowest value for max)."""
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return {"max": info.min, "min": info.max, "prod": 1, "sum": 0}[kind]


def _unsorted(ctx: OpContext, kind: str, ufunc: np.ufunc) -> np.ndarray:
    """The UNSORTED_SEGMENT_* reduction `kind` (folded by `ufunc`) into num_segments rows."""
    data = data_input(ctx, 0, SEGMENT_TYPES)
    ids = _segment_ids(ctx)
    count = required_input(ctx, 2, "num_segments")
    require_dtype(ctx, count, I32, "num_segments")
    if count.size != 1 or count.ndim > 1:
        raise op_error(ctx, f"num_segments must be one value, got shape {list(count.shape)}")
    segments = int(count.reshape(()))
    if ids.ndim > data.ndim or data.shape[: ids.ndim] != ids.shape:
        raise op_error(
            ctx, f"segment_ids {list(ids.shape)} is not a prefix of data {list(data.shape)}"
        )
    if segments < 0:
        raise op_error(ctx, f"num_segments {segments} is negative")
    if ids.size and int(ids.max()) >= segments:
        raise op_error(ctx, f"segment id {int(ids.max())} is out of range for {segments} segments")
    shape = (segments,) + data.shape[ids.ndim :]
    check_output(ctx, shape, data.dtype)
    out = np.full(shape, _initial(kind, data.dtype), data.dtype)
    return _reduce_into(out, ids.reshape(-1), data, ufunc)


@register("UNSORTED_SEGMENT_SUM", versions=(1,))
def unsorted_segment_sum(ctx: OpContext) -> np.ndarray:
    """UNSORTED_SEGMENT_SUM: sums of the data slices sharing a segment id (ids of any shape
    prefixing data's; negative ids skipped) into num_segments rows; empty rows are 0."""
    return _unsorted(ctx, "sum", np.add)


@register("UNSORTED_SEGMENT_MAX", versions=(1,))
def unsorted_segment_max(ctx: OpContext) -> np.ndarray:
    """UNSORTED_SEGMENT_MAX: maxima of the data slices sharing a segment id; empty rows hold
    the type's lowest value."""
    return _unsorted(ctx, "max", np.maximum)


@register("UNSORTED_SEGMENT_MIN", versions=(1,))
def unsorted_segment_min(ctx: OpContext) -> np.ndarray:
    """UNSORTED_SEGMENT_MIN: minima of the data slices sharing a segment id; empty rows hold
    the type's highest value."""
    return _unsorted(ctx, "min", np.minimum)


@register("UNSORTED_SEGMENT_PROD", versions=(1,))
def unsorted_segment_prod(ctx: OpContext) -> np.ndarray:
    """UNSORTED_SEGMENT_PROD: products of the data slices sharing a segment id (int32
    wraps); empty rows are 1."""
    return _unsorted(ctx, "prod", np.multiply)
