"""Shape and layout ops: reshape, shape, pack/unpack, squeeze, expand, transpose, concat,
cast, gather, tile, broadcast, fill, zeros like, range.
(ONES_LIKE is no TFLite builtin: the schema has no code for it.)

Most of these move values without arithmetic, so quantized tensors pass through as their
integer values (TFLite requires equal input and output quantization). CONCATENATION is the
exception: uint8 inputs with other scales are rescaled as TFLite's ConcatenationWithScaling.
Output shapes are computed from the input values, never taken from the declared tensors.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..errors import ModelError
from .alloc import check_alloc
from .common import apply_activation, quant_params, round_half_away
from .registry import OpContext, register

_dt = np.dtype
#: Element types of the data-moving ops.
DATA_TYPES = frozenset(
    _dt(t)
    for t in (np.float32, np.float16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_)
)
#: Element types of index, shape and axis tensors.
INDEX_TYPES = frozenset((_dt(np.int32), _dt(np.int64)))
QUANTIZED_TYPES = frozenset((_dt(np.int8), _dt(np.uint8), _dt(np.int16)))


# -- helpers shared by the shape, slicing, resize and space kernels -------------------------


def op_error(ctx: OpContext, message: str) -> ModelError:
    """A ModelError naming the operator."""
    return ModelError(f"{ctx.op.describe()}: {message}")


def check_output(
    ctx: OpContext, shape: Iterable[int], dtype: np.dtype | type, what: str = "output"
) -> None:
    """ModelError naming the op unless an array of `shape` fits the kernel limits: call
    it before allocating anything sized from input values."""
    check_alloc(shape, dtype, f"{ctx.op.describe()}: {what}")


def require_dtype(
    ctx: OpContext, x: np.ndarray, allowed: Iterable[np.dtype], what: str = "input"
) -> None:
    """ModelError naming the op and dtype unless `x` has one of the `allowed` dtypes."""
    allowed = frozenset(_dt(a) for a in allowed)
    if x.dtype not in allowed:
        names = ", ".join(sorted(a.name for a in allowed))
        raise op_error(ctx, f"{what} dtype {x.dtype.name} is not supported ({names})")


def required_input(ctx: OpContext, i: int, what: str) -> np.ndarray:
    """Input `i`, or ModelError when it is absent."""
    x = ctx.input(i)
    if x is None:
        raise op_error(ctx, f"{what} (input {i}) is missing")
    return x


def index_values(
    ctx: OpContext, i: int, what: str, allowed: Iterable[np.dtype] = INDEX_TYPES
) -> np.ndarray:
    """Input `i` as an int64 array: a shape, axis, index or size tensor."""
    x = required_input(ctx, i, what)
    require_dtype(ctx, x, allowed, what)
    return x.astype(np.int64)


def scalar_value(ctx: OpContext, i: int, what: str) -> int:
    """Input `i` holding one integer (a scalar or a one-element tensor)."""
    x = index_values(ctx, i, what)
    if x.size != 1:
        raise op_error(ctx, f"{what} must hold one value, got shape {list(x.shape)}")
    return int(x.reshape(()))


def normalize_axis(ctx: OpContext, axis: int, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) as a non-negative axis, or ModelError."""
    if not -rank <= axis < rank:
        raise op_error(ctx, f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def is_quantized(ctx: OpContext, position: int = 0, output: bool = False) -> bool:
    """Whether an input (or output) tensor is an integer tensor with quantization."""
    t = ctx.out_tensors[position] if output else ctx.in_tensors[position]
    return t is not None and t.quantization is not None and t.dtype in QUANTIZED_TYPES


def data_input(ctx: OpContext, i: int = 0, allowed: Iterable[np.dtype] = DATA_TYPES) -> np.ndarray:
    """Input `i` of a data-moving op, dtype checked."""
    x = required_input(ctx, i, "input")
    require_dtype(ctx, x, allowed)
    return x


# -- reshape family ---------------------------------------------------------------------------


def _target_shape(ctx: OpContext) -> list[int]:
    """RESHAPE's requested shape: input 1 when it is a vector, else the new_shape option."""
    shape = ctx.input(1)
    if shape is not None and shape.ndim == 1:
        return [int(v) for v in index_values(ctx, 1, "shape")]
    new_shape = list(ctx.opt("new_shape", None) or [])
    if len(new_shape) == 1 and new_shape[0] == 0:
        return []  # legacy models write a scalar shape as [0]
    return new_shape


def infer_shape(ctx: OpContext, shape: list[int], size: int) -> tuple[int, ...]:
    """Resolve one -1 in `shape` so that it holds `size` elements, or ModelError."""
    if shape.count(-1) > 1:
        raise op_error(ctx, f"shape {shape} has more than one -1")
    if any(d < -1 for d in shape):
        raise op_error(ctx, f"shape {shape} has a negative dimension")
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if -1 in shape:
        fill = 0 if known == 0 else size // known
        shape = [fill if d == -1 else d for d in shape]
        known *= fill
    if known != size:
        raise op_error(ctx, f"cannot reshape {size} elements into shape {shape}")
    return tuple(shape)


#: RESHAPE moves bytes whatever they hold: complex spectra too (tf.signal.stft's frames
#: after RFFT2D), as TFLite's kernel, which copies the buffer.
RESHAPE_TYPES = DATA_TYPES | {_dt(np.complex64), _dt(np.complex128)}


@register("RESHAPE", versions=(1,))
def reshape(ctx: OpContext) -> np.ndarray:
    """RESHAPE: new shape from input 1 (a vector) or the options, one -1 inferred."""
    x = data_input(ctx, allowed=RESHAPE_TYPES)
    return x.reshape(infer_shape(ctx, _target_shape(ctx), x.size))


@register("SHAPE", versions=(1,))
def shape(ctx: OpContext) -> np.ndarray:
    """SHAPE: the input's shape as int32 or int64 (out_type)."""
    x = required_input(ctx, 0, "input")
    out_type = ctx.out_tensors[0].dtype
    if out_type not in INDEX_TYPES:
        raise op_error(ctx, f"output dtype {out_type.name} is not supported (int32, int64)")
    return np.array(x.shape, dtype=out_type)


@register("SQUEEZE", versions=(1, 2))
def squeeze(ctx: OpContext) -> np.ndarray:
    """SQUEEZE: drop the listed size-1 dimensions (all of them when none is listed)."""
    x = data_input(ctx)
    dims = list(ctx.opt("squeeze_dims", None) or [])
    if not dims:
        return x.reshape(tuple(d for d in x.shape if d != 1))
    axes = {normalize_axis(ctx, int(d), x.ndim, "squeeze dimension") for d in dims}
    for a in axes:
        if x.shape[a] != 1:
            raise op_error(ctx, f"cannot squeeze dimension {a} of size {x.shape[a]}")
    return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


@register("EXPAND_DIMS", versions=(1,))
def expand_dims(ctx: OpContext) -> np.ndarray:
    """EXPAND_DIMS: insert a size-1 dimension at axis (input 1) in [-rank-1, rank]."""
    x = data_input(ctx)
    axis = normalize_axis(ctx, scalar_value(ctx, 1, "axis"), x.ndim + 1)
    return np.expand_dims(x, axis)


# -- pack, unpack, transpose, concat ---------------------------------------------------------


@register("PACK", versions=range(1, 6))
def pack(ctx: OpContext) -> np.ndarray:
    """PACK: stack equal-shaped inputs along a new axis."""
    xs = [data_input(ctx, i) for i in range(len(ctx.inputs))]
    if any(x.shape != xs[0].shape or x.dtype != xs[0].dtype for x in xs):
        shapes = ", ".join(f"{x.dtype.name}{list(x.shape)}" for x in xs)
        raise op_error(ctx, f"inputs differ in shape or type: {shapes}")
    axis = normalize_axis(ctx, int(ctx.opt("axis", 0)), xs[0].ndim + 1)
    check_output(ctx, (len(xs), *xs[0].shape), xs[0].dtype)
    return np.stack(xs, axis=axis)


@register("UNPACK", versions=range(1, 7))
def unpack(ctx: OpContext) -> list[np.ndarray]:
    """UNPACK: split along axis into `num` tensors with that axis removed."""
    x = data_input(ctx)
    axis = normalize_axis(ctx, int(ctx.opt("axis", 0)), x.ndim)
    if x.shape[axis] != len(ctx.out_tensors):
        raise op_error(
            ctx, f"axis {axis} has size {x.shape[axis]}, the op has {len(ctx.out_tensors)} outputs"
        )
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@register("TRANSPOSE", versions=range(1, 10))
def transpose(ctx: OpContext) -> np.ndarray:
    """TRANSPOSE: permute dimensions by perm (input 1), rank up to 6."""
    x = data_input(ctx)
    perm = [int(p) for p in index_values(ctx, 1, "perm").reshape(-1)]
    if sorted(perm) != list(range(x.ndim)):
        raise op_error(ctx, f"perm {perm} is not a permutation of the {x.ndim} dimensions")
    return np.transpose(x, perm)


def _concat_uint8_rescaled(ctx: OpContext, xs: list[np.ndarray], axis: int) -> np.ndarray:
    """uint8 concat where an input's quantization differs from the output's:
    q_out = round(q_in * s_in/s_out - zp_in * s_in/s_out) + zp_out, in float32 (TFLite)."""
    oq = quant_params(ctx.out_tensors[0], "output")
    out_scale, out_zp = np.float32(oq.scale[0]), int(oq.zero_point[0])
    inverse = np.float32(1.0) / out_scale
    parts = []
    for x, t in zip(xs, ctx.in_tensors, strict=True):
        q = quant_params(t, "input")
        in_scale, in_zp = np.float32(q.scale[0]), int(q.zero_point[0])
        if in_scale == out_scale and in_zp == out_zp:
            parts.append(x)
            continue
        scale = in_scale * inverse
        bias = np.float32(-in_zp) * scale
        value = round_half_away(x.astype(np.float32) * scale + bias).astype(np.int64) + out_zp
        parts.append(np.clip(value, 0, 255).astype(np.uint8))
    return np.concatenate(parts, axis=axis)


def _check_same_quantization(ctx: OpContext) -> None:
    """int8/int16 concat does not rescale: TFLite requires each input quantized as the output."""
    oq = quant_params(ctx.out_tensors[0], "output")
    for t in ctx.in_tensors:
        q = quant_params(t, "input")
        if float(q.scale[0]) != float(oq.scale[0]) or int(q.zero_point[0]) != int(oq.zero_point[0]):
            raise op_error(
                ctx,
                f"{t.dtype.name} input '{t.name}' is quantized differently from the output "
                "(TFLite rescales only uint8 inputs)",
            )


@register("CONCATENATION", versions=range(1, 8))
def concatenation(ctx: OpContext) -> np.ndarray:
    """CONCATENATION along axis, then the fused activation (float); uint8 inputs with other
    quantization are rescaled to the output's.

    NOTE: LiteRT's builtin kernel rejects a fused activation and XNNPACK ignores it; we apply
    it, as the schema and the GPU delegate do (the converter never fuses one here)."""
    xs = [data_input(ctx, i) for i in range(len(ctx.inputs))]
    rank = xs[0].ndim
    axis = normalize_axis(ctx, int(ctx.opt("axis", 0)), rank)
    for x in xs:
        if x.dtype != xs[0].dtype or x.ndim != rank:
            raise op_error(ctx, "inputs differ in type or rank")
        if x.shape[:axis] + x.shape[axis + 1 :] != xs[0].shape[:axis] + xs[0].shape[axis + 1 :]:
            raise op_error(ctx, f"input shapes {[list(x.shape) for x in xs]} differ off axis")
    out_shape = list(xs[0].shape)
    out_shape[axis] = sum(x.shape[axis] for x in xs)
    check_output(ctx, out_shape, xs[0].dtype)
    if is_quantized(ctx, 0, output=True):
        if xs[0].dtype == np.uint8:
            return _concat_uint8_rescaled(ctx, xs, axis)
        _check_same_quantization(ctx)
    out = np.concatenate(xs, axis=axis)
    act = int(ctx.opt("fused_activation_function", 0))
    if act and out.dtype.kind == "f":
        out = apply_activation(out, act)
    return out


# -- cast ------------------------------------------------------------------------------------

#: Types CAST converts between.
CAST_TYPES = DATA_TYPES | frozenset(_dt(t) for t in (np.float64, np.uint16, np.uint32))


@register("CAST", versions=range(1, 10))
def cast(ctx: OpContext) -> np.ndarray:
    """CAST to the output's type: C casts (floats truncate toward zero, bools are x != 0)."""
    x = data_input(ctx, 0, CAST_TYPES)
    out_type = ctx.out_tensors[0].dtype
    if out_type not in CAST_TYPES:
        raise op_error(ctx, f"output dtype {out_type.name} is not supported")
    if out_type == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and out_type.kind in "iu":
        x = np.trunc(x)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(out_type)


# -- gather ----------------------------------------------------------------------------------


def _check_indices(ctx: OpContext, idx: np.ndarray, limit: int | np.ndarray, what: str) -> None:
    bad = (idx < 0) | (idx >= limit)
    if np.any(bad):
        first = int(idx[bad].reshape(-1)[0])
        raise op_error(ctx, f"{what} {first} is out of range [0, {limit})")


@register("GATHER", versions=range(1, 9))
def gather(ctx: OpContext) -> np.ndarray:
    """GATHER: params[..., indices, ...] along axis, the first batch_dims dims shared."""
    params = data_input(ctx)
    indices = required_input(ctx, 1, "indices")
    require_dtype(ctx, indices, INDEX_TYPES | {_dt(np.int16)}, "indices")
    axis = normalize_axis(ctx, int(ctx.opt("axis", 0)), params.ndim)
    batch_dims = int(ctx.opt("batch_dims", 0))
    if batch_dims < 0:
        batch_dims += indices.ndim
    if not 0 <= batch_dims <= min(axis, indices.ndim):
        raise op_error(ctx, f"batch_dims {batch_dims} must be in [0, min(axis, indices rank)]")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise op_error(ctx, "params and indices differ in their batch dimensions")
    _check_indices(ctx, indices, params.shape[axis], "gather index")
    shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1 :]
    check_output(ctx, shape, params.dtype)
    batch = int(np.prod(params.shape[:batch_dims], dtype=np.int64))
    outer = int(np.prod(params.shape[batch_dims:axis], dtype=np.int64))
    inner = int(np.prod(params.shape[axis + 1 :], dtype=np.int64))
    p = params.reshape(batch, outer, params.shape[axis], inner)
    idx = indices.astype(np.int64).reshape(batch, 1, -1)
    taken = p[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], idx]
    return taken.reshape(shape)


@register("GATHER_ND", versions=range(1, 7))
def gather_nd(ctx: OpContext) -> np.ndarray:
    """GATHER_ND: slices of params addressed by the last dimension of indices."""
    params = data_input(ctx)
    indices = required_input(ctx, 1, "indices")
    require_dtype(ctx, indices, INDEX_TYPES | {_dt(np.int16)}, "indices")
    depth = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or depth > params.ndim:
        raise op_error(ctx, f"indices shape {list(indices.shape)} does not fit params rank")
    idx = indices.astype(np.int64).reshape(-1, depth)
    _check_indices(ctx, idx, np.array(params.shape[:depth]), "gather_nd index")
    shape = indices.shape[:-1] + params.shape[depth:]
    check_output(ctx, shape, params.dtype)
    return params[tuple(idx.T)].reshape(shape)


# -- tile, broadcast, fill, like, range ------------------------------------------------------


@register("TILE", versions=(1, 2, 3))
def tile(ctx: OpContext) -> np.ndarray:
    """TILE: repeat the input `multiples[i]` times along each dimension."""
    x = data_input(ctx)
    multiples = index_values(ctx, 1, "multiples").reshape(-1)
    if multiples.size != x.ndim or np.any(multiples < 0):
        raise op_error(ctx, f"multiples {multiples.tolist()} do not fit rank {x.ndim}")
    reps = tuple(int(m) for m in multiples)
    check_output(ctx, [d * m for d, m in zip(x.shape, reps, strict=True)], x.dtype)
    return np.tile(x, reps)


@register("BROADCAST_TO", versions=(2, 3, 4))
def broadcast_to(ctx: OpContext) -> np.ndarray:
    """BROADCAST_TO: numpy broadcasting to the shape in input 1."""
    x = data_input(ctx)
    target = tuple(int(d) for d in index_values(ctx, 1, "shape").reshape(-1))
    try:
        view = np.broadcast_to(x, target)
    except ValueError as exc:
        raise op_error(ctx, f"cannot broadcast {list(x.shape)} to {list(target)}") from exc
    check_output(ctx, target, x.dtype)
    return np.array(view)


@register("FILL", versions=range(1, 6))
def fill(ctx: OpContext) -> np.ndarray:
    """FILL: a tensor of shape `dims` (input 0) filled with the scalar `value` (input 1)."""
    dims = tuple(int(d) for d in index_values(ctx, 0, "dims").reshape(-1))
    if any(d < 0 for d in dims):
        raise op_error(ctx, f"dims {list(dims)} has a negative dimension")
    value = data_input(ctx, 1)
    if value.size != 1:
        raise op_error(ctx, f"value must be a scalar, got shape {list(value.shape)}")
    check_output(ctx, dims, value.dtype)
    return np.full(dims, value.reshape(()), dtype=value.dtype)


@register("ZEROS_LIKE", versions=(1,))
def zeros_like(ctx: OpContext) -> np.ndarray:
    """ZEROS_LIKE: zeros of the input's shape and type."""
    return np.zeros_like(data_input(ctx))


def _range_size(ctx: OpContext, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int:
    if delta == 0:
        raise op_error(ctx, "delta must not be zero")
    if (start > limit and delta > 0) or (start < limit and delta < 0):
        raise op_error(ctx, f"delta {delta} does not move start {start} toward limit {limit}")
    if start.dtype.kind == "f":
        return int(np.ceil(np.abs((limit - start) / delta)))
    return int((abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta)))


@register("RANGE", versions=(1, 2))
def range_(ctx: OpContext) -> np.ndarray:
    """RANGE: start, start + delta, ... up to limit (exclusive), accumulated as TFLite."""
    allowed = (np.int32, np.int64, np.float32)
    start, limit, delta = (data_input(ctx, i, allowed).reshape(-1) for i in range(3))
    if not (start.size == limit.size == delta.size == 1):
        raise op_error(ctx, "start, limit and delta must be scalars")
    if not start.dtype == limit.dtype == delta.dtype:
        raise op_error(ctx, "start, limit and delta differ in type")
    start, limit, delta = start[0], limit[0], delta[0]
    n = _range_size(ctx, start, limit, delta)
    check_output(ctx, (n,), start.dtype)
    steps = np.full(n, delta, dtype=start.dtype)
    if n:
        steps[0] = start
    return np.add.accumulate(steps, dtype=start.dtype)  # sequential, like value += delta
