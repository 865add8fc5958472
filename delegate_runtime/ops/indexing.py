"""Indexing and scattering: ONE_HOT, TOPK_V2, REVERSE_V2, REVERSE_SEQUENCE, MATRIX_DIAG,
MATRIX_SET_DIAG, UNIQUE, SCATTER_ND, DYNAMIC_UPDATE_SLICE, SPARSE_TO_DENSE,
EMBEDDING_LOOKUP(_SPARSE), BUCKETIZE, DILATE.

Semantics, accepted types and refusals follow TFLite's kernels (tflite/kernels/<op>.cc).
Values move without arithmetic, so quantized tensors pass through as their integers;
EMBEDDING_LOOKUP's hybrid form dequantizes int8/uint8 rows to float as TFLite does.
Output shapes that depend on input values are computed from them and checked against
the kernel limits before anything is allocated.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import TFLITE_TO_NUMPY
from .registry import OpContext, register
from .shape import (
    DATA_TYPES,
    INDEX_TYPES,
    check_output,
    data_input,
    index_values,
    normalize_axis,
    op_error,
    require_dtype,
    required_input,
    scalar_value,
)

_dt = np.dtype
I32 = frozenset((_dt(np.int32),))
#: Element types of ONE_HOT's output (TFLite's Eval; int16 passes Prepare but not Eval).
ONE_HOT_TYPES = frozenset(
    _dt(t) for t in (np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_)
)
TOPK_TYPES = frozenset(
    _dt(t) for t in (np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64)
)
REVERSE_TYPES = DATA_TYPES
REVERSE_SEQUENCE_TYPES = frozenset(
    _dt(t) for t in (np.float32, np.uint8, np.int16, np.int32, np.int64)
)
MATRIX_DIAG_TYPES = frozenset(
    _dt(t) for t in (np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8)
)
UNIQUE_TYPES = frozenset(
    _dt(t) for t in (np.int8, np.int16, np.uint16, np.int32, np.int64, np.float32, np.uint8)
)
SCATTER_ND_TYPES = frozenset(
    _dt(t) for t in (np.float32, np.uint8, np.bool_, np.int8, np.int64, np.int32)
)
DYNAMIC_UPDATE_SLICE_TYPES = frozenset(
    _dt(t) for t in (np.float16, np.float32, np.bool_, np.int8, np.int16, np.int32, np.int64)
)
SPARSE_TO_DENSE_TYPES = frozenset(
    _dt(t) for t in (np.int32, np.int64, np.int8, np.uint8, np.float32)
)
BUCKETIZE_TYPES = frozenset(_dt(t) for t in (np.int32, np.int64, np.float32, np.float64))
#: SPARSE_TO_DENSE writes at most this many output dimensions (TFLite's kMaxDimensions).
SPARSE_TO_DENSE_MAX_DIMS = 4
#: REVERSE_V2 handles at most this many dimensions.
REVERSE_MAX_DIMS = 8


def _check_range(ctx: OpContext, idx: np.ndarray, limit: int, what: str) -> None:
    """ModelError naming the first value of `idx` outside [0, limit)."""
    bad = (idx < 0) | (idx >= limit)
    if np.any(bad):
        first = int(np.asarray(idx)[bad].reshape(-1)[0])
        raise op_error(ctx, f"{what} {first} is out of range [0, {limit})")


# -- one hot, top k ------------------------------------------------------------------------


@register("ONE_HOT", versions=(1,))
def one_hot(ctx: OpContext) -> np.ndarray:
    """ONE_HOT: on_value where indices == j along a new `axis` of size depth, else off_value
    (indices outside [0, depth) give an all-off row)."""
    indices = required_input(ctx, 0, "indices")
    require_dtype(ctx, indices, INDEX_TYPES, "indices")
    depth = scalar_value(ctx, 1, "depth")
    on, off = required_input(ctx, 2, "on_value"), required_input(ctx, 3, "off_value")
    require_dtype(ctx, on, ONE_HOT_TYPES, "on_value")
    if off.dtype != on.dtype:
        raise op_error(ctx, f"off_value is {off.dtype.name}, on_value {on.dtype.name}")
    if on.size != 1 or off.size != 1:
        raise op_error(ctx, "on_value and off_value must each hold one value")
    if depth < 0:
        raise op_error(ctx, f"depth {depth} is negative")
    axis = int(ctx.opt("axis", -1))
    axis = indices.ndim if axis == -1 else axis
    if not 0 <= axis <= indices.ndim:
        raise op_error(ctx, f"axis {axis} is out of range for {indices.ndim + 1} output dims")
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    check_output(ctx, shape, on.dtype)
    positions = np.arange(depth).reshape((depth,) + (1,) * (indices.ndim - axis))
    hot = np.expand_dims(indices.astype(np.int64), axis) == positions
    return np.where(hot, on.reshape(()), off.reshape(())).astype(on.dtype)


@register("TOPK_V2", versions=(1, 2, 3))
def topk_v2(ctx: OpContext) -> list[np.ndarray]:
    """TOPK_V2: the k largest values of each last-dimension row, largest first, and their
    indices; equal values keep their order (the lower index first)."""
    x = data_input(ctx, 0, TOPK_TYPES)
    k_in = required_input(ctx, 1, "k")
    require_dtype(ctx, k_in, (np.int32, np.int16), "k")
    if k_in.size != 1:
        raise op_error(ctx, f"k must hold one value, got shape {list(k_in.shape)}")
    k = int(k_in.reshape(()))
    if x.ndim < 1:
        raise op_error(ctx, "input must have at least one dimension")
    if k > x.shape[-1]:
        raise op_error(ctx, f"k {k} is larger than the last dimension {x.shape[-1]}")
    index_type = ctx.out_tensors[1].dtype
    if index_type not in (np.int32, np.int16):
        raise op_error(ctx, f"index output dtype {index_type.name} is not supported (int16, int32)")
    k = max(k, 0)
    n = x.shape[-1]
    # A stable ascending sort of the reversed row, reversed: descending values, and among
    # equal values the lower original index first.
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    indices = (n - 1) - order
    return [np.take_along_axis(x, indices, axis=-1), indices.astype(index_type)]


# -- reversing ------------------------------------------------------------------------------


@register("REVERSE_V2", versions=(1, 2, 3))
def reverse_v2(ctx: OpContext) -> np.ndarray:
    """REVERSE_V2: the input reversed along the listed axes (which must be adjacent)."""
    x = data_input(ctx, 0, REVERSE_TYPES)
    axis_in = required_input(ctx, 1, "axis")
    require_dtype(ctx, axis_in, I32, "axis")
    if axis_in.ndim != 1:
        raise op_error(ctx, f"axis must be a vector, got shape {list(axis_in.shape)}")
    if x.ndim > REVERSE_MAX_DIMS or axis_in.size > x.ndim:
        raise op_error(ctx, f"{axis_in.size} axes for an input of rank {x.ndim}")
    axes = sorted(normalize_axis(ctx, int(a), x.ndim) for a in axis_in)
    if any(b != a + 1 for a, b in zip(axes, axes[1:], strict=False)):
        raise op_error(ctx, f"axes {axes} are not contiguous (TFLite reverses adjacent axes only)")
    return np.flip(x, tuple(axes)).copy()


@register("REVERSE_SEQUENCE", versions=(1,))
def reverse_sequence(ctx: OpContext) -> np.ndarray:
    """REVERSE_SEQUENCE: for each batch b, the first seq_lengths[b] elements along seq_dim
    reversed, the rest unchanged."""
    x = data_input(ctx, 0, REVERSE_SEQUENCE_TYPES)
    lengths = index_values(ctx, 1, "seq_lengths")
    seq_dim, batch_dim = int(ctx.opt("seq_dim", 0)), int(ctx.opt("batch_dim", 0))
    if lengths.ndim != 1:
        raise op_error(ctx, f"seq_lengths must be a vector, got shape {list(lengths.shape)}")
    if not (0 <= seq_dim < x.ndim and 0 <= batch_dim < x.ndim) or seq_dim == batch_dim:
        raise op_error(
            ctx,
            f"seq_dim {seq_dim} and batch_dim {batch_dim} must be distinct dims of rank {x.ndim}",
        )
    if lengths.size != x.shape[batch_dim]:
        raise op_error(
            ctx, f"{lengths.size} seq_lengths for batch dimension of size {x.shape[batch_dim]}"
        )
    steps = x.shape[seq_dim]
    bad = (lengths < 0) | (lengths > steps)
    if np.any(bad):
        raise op_error(ctx, f"seq_length {int(lengths[bad][0])} is outside [0, {steps}]")
    shape = [1] * x.ndim
    shape[seq_dim], shape[batch_dim] = steps, lengths.size
    j = np.arange(steps).reshape([-1 if d == seq_dim else 1 for d in range(x.ndim)])
    length = lengths.reshape([-1 if d == batch_dim else 1 for d in range(x.ndim)])
    source = np.broadcast_to(np.where(j < length, length - 1 - j, j), x.shape)
    return np.take_along_axis(x, source, axis=seq_dim)


# -- diagonals ------------------------------------------------------------------------------


@register("MATRIX_DIAG", versions=(1,))
def matrix_diag(ctx: OpContext) -> np.ndarray:
    """MATRIX_DIAG: [..., N] -> [..., N, N] with the input on the diagonal, zeros elsewhere."""
    x = data_input(ctx, 0, MATRIX_DIAG_TYPES)
    if x.ndim < 1:
        raise op_error(ctx, "input must have at least one dimension")
    n = x.shape[-1]
    check_output(ctx, x.shape + (n,), x.dtype)
    out = np.zeros(x.shape + (n,), x.dtype)
    out[..., np.arange(n), np.arange(n)] = x
    return out


@register("MATRIX_SET_DIAG", versions=(1,))
def matrix_set_diag(ctx: OpContext) -> np.ndarray:
    """MATRIX_SET_DIAG: the input [..., M, N] with its main diagonals replaced by `diagonal`
    [..., min(M, N)]."""
    x = data_input(ctx, 0, MATRIX_DIAG_TYPES)
    diag = required_input(ctx, 1, "diagonal")
    if x.ndim < 2:
        raise op_error(ctx, f"input must have at least two dimensions, got {x.ndim}")
    if diag.dtype != x.dtype:
        raise op_error(ctx, f"diagonal is {diag.dtype.name}, input {x.dtype.name}")
    m = min(x.shape[-2], x.shape[-1])
    batch = x.shape[:-2]
    if diag.size != int(np.prod(batch, dtype=np.int64)) * m:
        raise op_error(
            ctx, f"diagonal of shape {list(diag.shape)} does not fit input {list(x.shape)}"
        )
    out = np.array(x)
    out[..., np.arange(m), np.arange(m)] = diag.reshape(batch + (m,))
    return out


# -- unique, scatter, update slice, sparse to dense ----------------------------------------


@register("UNIQUE", versions=(1,))
def unique(ctx: OpContext) -> list[np.ndarray]:
    """UNIQUE: the distinct values of a vector in order of first appearance, and for each
    element the position of its value among them (int32 or int64, idx_out_type)."""
    x = data_input(ctx, 0, UNIQUE_TYPES)
    if x.ndim != 1:
        raise op_error(ctx, f"input must be a vector, got shape {list(x.shape)}")
    code = int(ctx.opt("idx_out_type", 2))
    index_type = TFLITE_TO_NUMPY.get(code)
    if index_type not in INDEX_TYPES:
        raise op_error(ctx, f"idx_out_type {code} is not int32 or int64")
    if ctx.out_tensors[1].dtype != index_type:
        raise op_error(
            ctx, f"index output is {ctx.out_tensors[1].dtype.name}, idx_out_type {index_type.name}"
        )
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    check_output(ctx, (order.size,), x.dtype)
    return [x[first[order]], position[inverse.reshape(-1)].astype(index_type)]


@register("SCATTER_ND", versions=(1,))
def scatter_nd(ctx: OpContext) -> np.ndarray:
    """SCATTER_ND: zeros of `shape` with the slices of `updates` added at `indices`
    (duplicates add up; bool updates are or-ed)."""
    indices = required_input(ctx, 0, "indices")
    updates = data_input(ctx, 1, SCATTER_ND_TYPES)
    shape_in = required_input(ctx, 2, "shape")
    require_dtype(ctx, indices, I32, "indices")
    require_dtype(ctx, shape_in, I32, "shape")
    if indices.ndim < 1 or updates.ndim < 1 or shape_in.ndim != 1:
        raise op_error(ctx, "indices and updates need rank >= 1 and shape must be a vector")
    shape = tuple(int(d) for d in shape_in)
    outer, depth = indices.shape[:-1], indices.shape[-1]
    if (
        depth > len(shape)
        or updates.shape[: len(outer)] != outer
        or updates.shape[len(outer) :] != shape[depth:]
    ):
        raise op_error(
            ctx,
            f"indices {list(indices.shape)}, updates {list(updates.shape)} and shape "
            f"{list(shape)} do not fit together",
        )
    check_output(ctx, shape, updates.dtype)
    idx = indices.reshape(-1, depth).astype(np.int64)
    for d in range(depth):
        _check_range(ctx, idx[:, d], shape[d], f"index along dimension {d}")
    out = np.zeros(shape, updates.dtype)
    slices = updates.reshape((idx.shape[0],) + shape[depth:])
    target = tuple(idx.T)
    if updates.dtype == np.bool_:
        np.logical_or.at(out, target, slices)
    else:
        np.add.at(out, target, slices)
    return out


@register("DYNAMIC_UPDATE_SLICE", versions=(1, 2, 3, 4))
def dynamic_update_slice(ctx: OpContext) -> np.ndarray:
    """DYNAMIC_UPDATE_SLICE: the operand with `update` written at start_indices, each start
    clamped to [0, operand_dim - update_dim] (XLA's semantics; a KV-cache write)."""
    operand = data_input(ctx, 0, DYNAMIC_UPDATE_SLICE_TYPES)
    update = required_input(ctx, 1, "update")
    start = index_values(ctx, 2, "start_indices")
    if update.dtype != operand.dtype:
        raise op_error(ctx, f"update is {update.dtype.name}, operand {operand.dtype.name}")
    if start.ndim != 1 or start.size != operand.ndim:
        raise op_error(
            ctx, f"start_indices of shape {list(start.shape)} for an operand of rank {operand.ndim}"
        )
    if update.ndim != operand.ndim or any(
        u > o for u, o in zip(update.shape, operand.shape, strict=True)
    ):
        raise op_error(
            ctx, f"update {list(update.shape)} does not fit in operand {list(operand.shape)}"
        )
    out = np.array(operand)
    begin = [
        min(max(int(s), 0), o - u)
        for s, o, u in zip(start, operand.shape, update.shape, strict=True)
    ]
    window = tuple(slice(b, b + u) for b, u in zip(begin, update.shape, strict=True))
    out[window] = update
    return out


def _sparse_indices(ctx: OpContext, indices: np.ndarray, rank: int) -> np.ndarray:
    """SPARSE_TO_DENSE's indices as [n, rank] (a scalar or vector indexes a 1-D output)."""
    if indices.ndim < 2:
        if rank != 1:
            raise op_error(ctx, f"a scalar or vector of indices needs a 1-D output, not {rank}-D")
        return indices.reshape(-1, 1)
    if indices.shape[1] != rank:
        raise op_error(ctx, f"indices of shape {list(indices.shape)} for a {rank}-D output")
    return indices


@register("SPARSE_TO_DENSE", versions=(1, 2, 3))
def sparse_to_dense(ctx: OpContext) -> np.ndarray:
    """SPARSE_TO_DENSE: a tensor of output_shape filled with default_value, with values (or
    the one scalar value) written at indices; a repeated index keeps the last value."""
    indices = index_values(ctx, 0, "indices")
    dims = index_values(ctx, 1, "output_shape")
    values = data_input(ctx, 2, SPARSE_TO_DENSE_TYPES)
    default = required_input(ctx, 3, "default_value")
    if indices.ndim > 2 or dims.ndim != 1 or values.ndim > 1:
        raise op_error(
            ctx,
            f"indices {list(indices.shape)} (rank <= 2), output_shape {list(dims.shape)} "
            f"(a vector) and values {list(values.shape)} (rank <= 1) do not fit",
        )
    if default.dtype != values.dtype or default.size != 1:
        raise op_error(ctx, "default_value must be one value of the values' type")
    shape = tuple(int(d) for d in dims)
    if len(shape) > SPARSE_TO_DENSE_MAX_DIMS:
        raise op_error(ctx, f"output has {len(shape)} dims; at most {SPARSE_TO_DENSE_MAX_DIMS}")
    idx = _sparse_indices(ctx, indices, len(shape))
    if values.ndim == 1 and values.size != idx.shape[0]:
        raise op_error(ctx, f"{values.size} values for {idx.shape[0]} indices")
    check_output(ctx, shape, values.dtype)
    for d in range(len(shape)):
        _check_range(ctx, idx[:, d], shape[d], f"index along dimension {d}")
    out = np.full(shape, default.reshape(()), values.dtype)
    if idx.shape[0] == 0:
        return out
    flat = np.ravel_multi_index(tuple(idx.T), shape) if shape else np.zeros(len(idx), np.int64)
    # Keep the last write of each position, as TFLite's sequential loop does.
    rev_unique, rev_first = np.unique(flat[::-1], return_index=True)
    last = len(flat) - 1 - rev_first
    picked = values.reshape(-1)[last] if values.ndim == 1 else values.reshape(())
    out.reshape(-1)[rev_unique] = picked
    return out


# -- embeddings ----------------------------------------------------------------------------


def _lookup_rows(ctx: OpContext, value: np.ndarray, what: str = "lookup") -> np.ndarray:
    lookup = required_input(ctx, 0, "lookup")
    require_dtype(ctx, lookup, I32, what)
    if lookup.ndim != 1:
        raise op_error(ctx, f"{what} must be a vector, got shape {list(lookup.shape)}")
    _check_range(ctx, lookup, value.shape[0], "embedding index")
    return lookup.astype(np.int64)


@register("EMBEDDING_LOOKUP", versions=(1, 2, 3, 4))
def embedding_lookup(ctx: OpContext) -> np.ndarray:
    """EMBEDDING_LOOKUP: rows of `value` picked by `lookup`; int8/uint8 rows with a float
    output are dequantized as TFLite's hybrid kernel: the stored byte read as int8, times the
    tensor's scale or the row's own scale (per-row quantization)."""
    value = required_input(ctx, 1, "value")
    if value.ndim < 2:
        raise op_error(ctx, f"value must have at least two dimensions, got {value.ndim}")
    rows = _lookup_rows(ctx, value)
    out_type = ctx.out_tensors[0].dtype
    check_output(ctx, (rows.size,) + value.shape[1:], out_type)
    if value.dtype == out_type:
        return value[rows]
    if value.dtype not in (np.int8, np.uint8) or out_type not in (np.float32, np.float16):
        raise op_error(
            ctx, f"value {value.dtype.name} with output {out_type.name} is not supported"
        )
    q = ctx.in_tensors[1].quantization
    if q is None:
        raise op_error(ctx, f"hybrid lookup: {value.dtype.name} value has no quantization")
    if int(q.zero_point[0]) != 0:
        raise op_error(ctx, "hybrid lookup needs symmetric quantization (zero point 0)")
    if q.scale.size > 1 and (q.axis != 0 or q.scale.size != value.shape[0]):
        raise op_error(
            ctx, f"{q.scale.size} scales on axis {q.axis} for {value.shape[0]} rows (axis 0)"
        )
    scale = q.scale.astype(np.float32)
    row_scale = scale[rows] if scale.size > 1 else np.repeat(scale[:1], rows.size)
    stored = value.view(np.int8)[rows].astype(np.float32)  # TFLite reads uint8 bytes as int8
    real = stored * row_scale.reshape((-1,) + (1,) * (value.ndim - 1))
    return real.astype(out_type)


#: CombinerType codes.
COMBINER_SUM, COMBINER_MEAN, COMBINER_SQRTN = 0, 1, 2


def _combine(out: np.ndarray, combiner: int, total: np.float32, squares: np.float32) -> None:
    """Divide a cell by its run's weight sum (mean) or root of squared weights (sqrtn)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if combiner == COMBINER_MEAN:
            out /= total
        elif combiner == COMBINER_SQRTN:
            out /= np.sqrt(squares)


@register("EMBEDDING_LOOKUP_SPARSE", versions=(1,))
def embedding_lookup_sparse(ctx: OpContext) -> np.ndarray:
    """EMBEDDING_LOOKUP_SPARSE: per output cell, the weighted sum of the rows `ids` picks,
    divided by the sum of weights (mean) or its root of squares (sqrtn) for each run of
    consecutive ids that share a cell, as TFLite's kernel groups them."""
    ids = required_input(ctx, 0, "ids")
    indices = required_input(ctx, 1, "indices")
    dense_shape = required_input(ctx, 2, "dense_shape")
    weights = required_input(ctx, 3, "weights")
    value = required_input(ctx, 4, "value")
    for t, what, rank in (
        (ids, "ids", 1),
        (indices, "indices", 2),
        (dense_shape, "dense_shape", 1),
    ):
        require_dtype(ctx, t, I32, what)
        if t.ndim != rank:
            raise op_error(ctx, f"{what} must have rank {rank}, got {t.ndim}")
    require_dtype(ctx, weights, (np.float32,), "weights")
    require_dtype(ctx, value, (np.float32,), "value")
    if weights.ndim != 1 or value.ndim < 2:
        raise op_error(ctx, "weights must be a vector and value of rank >= 2")
    if not indices.shape[0] == ids.size == weights.size:
        raise op_error(ctx, f"{ids.size} ids, {indices.shape[0]} indices, {weights.size} weights")
    lookup_rank = indices.shape[1]
    if dense_shape.size != lookup_rank or lookup_rank < 1:
        raise op_error(ctx, f"dense_shape has {dense_shape.size} dims, indices {lookup_rank}")
    combiner = int(ctx.opt("combiner", COMBINER_SUM))
    if combiner not in (COMBINER_SUM, COMBINER_MEAN, COMBINER_SQRTN):
        raise op_error(ctx, f"unknown combiner {combiner}")
    _check_range(ctx, ids, value.shape[0], "embedding id")
    cells = tuple(int(d) for d in dense_shape[:-1])
    shape = cells + value.shape[1:]
    check_output(ctx, shape, np.float32)
    for d, size in enumerate(cells):
        _check_range(ctx, indices[:, d], size, f"index along dimension {d}")
    bucket = (
        np.ravel_multi_index(tuple(indices[:, :-1].T.astype(np.int64)), cells)
        if cells
        else np.zeros(ids.size, np.int64)
    )
    rows = value.reshape(value.shape[0], -1)
    out = np.zeros((int(np.prod(cells, dtype=np.int64)), rows.shape[1]), np.float32)
    start = 0
    while start < ids.size:
        stop = start + 1
        while stop < ids.size and bucket[stop] == bucket[start]:
            stop += 1
        w = weights[start:stop]
        cell = out[bucket[start]]
        for i in range(start, stop):
            cell += rows[ids[i]] * weights[i]
        if combiner != COMBINER_SUM:
            _combine(cell, combiner, np.float32(np.sum(w)), np.float32(np.sum(w * w)))
        start = stop
    return out.reshape(shape)


# -- bucketize, dilate -----------------------------------------------------------------------


@register("BUCKETIZE", versions=(1,))
def bucketize(ctx: OpContext) -> np.ndarray:
    """BUCKETIZE: for each value, the number of boundaries <= it (int32)."""
    x = data_input(ctx, 0, BUCKETIZE_TYPES)
    boundaries = np.asarray(ctx.opt("boundaries", None) or [], np.float32)
    if np.any(boundaries[1:] < boundaries[:-1]):
        raise op_error(ctx, f"boundaries {boundaries.tolist()} are not sorted")
    # TFLite compares each value with the float boundaries in the value's C++ type promoted
    # with float: integers as float, doubles as double.
    keys = x.astype(np.float64) if x.dtype == np.float64 else x.astype(np.float32)
    return np.searchsorted(boundaries.astype(keys.dtype), keys, side="right").astype(np.int32)


@register("DILATE", versions=(1,))
def dilate(ctx: OpContext) -> np.ndarray:
    """DILATE: the input spread out by `dilations` per dimension, the gaps filled with
    padding_value (output dim = (dim - 1) * dilation + 1)."""
    x = data_input(ctx)
    dilations = required_input(ctx, 1, "dilations")
    require_dtype(ctx, dilations, I32, "dilations")
    pad = required_input(ctx, 2, "padding_value")
    if x.ndim < 1:
        raise op_error(ctx, "input must have at least one dimension")
    if dilations.ndim != 1 or dilations.size != x.ndim:
        raise op_error(ctx, f"dilations {list(dilations.shape)} for an input of rank {x.ndim}")
    if np.any(dilations < 1):
        raise op_error(ctx, f"dilations {dilations.tolist()} must be >= 1")
    if pad.dtype != x.dtype or pad.size != 1:
        raise op_error(ctx, "padding_value must be one value of the input's type")
    factors = [int(f) for f in dilations]
    shape = tuple(max((d - 1) * f + 1, 0) for d, f in zip(x.shape, factors, strict=True))
    check_output(ctx, shape, x.dtype)
    out = np.full(shape, pad.reshape(()), x.dtype)
    out[tuple(slice(None, None, f) for f in factors)] = x
    return out
