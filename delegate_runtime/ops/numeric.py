"""Numeric ops past plain arithmetic: rounding (FLOOR, CEIL, ROUND), SIGN, ATAN2, bitwise ops, BITCAST, RANK, BROADCAST_ARGS, FAKE_QUANT."""

from __future__ import annotations

import numpy as np

from .registry import OpContext, register
from .shape import op_error, require_dtype, required_input

F32 = np.dtype(np.float32)
#: Element types of the bitwise kernels (BITWISE_XOR, RIGHT_SHIFT).
BITWISE_TYPES = tuple(
    np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)
)
#: FAKE_QUANT's bit widths (TensorFlow's FakeQuantWithMinMaxArgs accepts 2 to 16).
FAKE_QUANT_BITS = (2, 16)


# -- unary rounding and sign ----------------------------------------------------------------


def _float32_input(ctx: OpContext) -> np.ndarray:
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (F32,))
    return x


@register("FLOOR", versions=(1,))
def floor(ctx: OpContext) -> np.ndarray:
    """Largest integer not above x (float32)."""
    return np.floor(_float32_input(ctx))


@register("CEIL", versions=(1,))
def ceil(ctx: OpContext) -> np.ndarray:
    """Smallest integer not below x (float32)."""
    return np.ceil(_float32_input(ctx))


@register("ROUND", versions=(1,))
def round_(ctx: OpContext) -> np.ndarray:
    """x rounded to the nearest integer, ties to even (TFLite's RoundToNearest; float32)."""
    return np.rint(_float32_input(ctx))


@register("SIGN", versions=(1, 2))
def sign(ctx: OpContext) -> np.ndarray:
    """1 where x > 0, -1 where x < 0, +0 at either zero, NaN stays NaN: float32/64, int32."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (np.float32, np.float64, np.int32))
    return np.where(x > 0, 1, np.where(x < 0, -1, np.where(x == 0, 0, x))).astype(x.dtype)


# -- binary ---------------------------------------------------------------------------------


@register("ATAN2", versions=(1,))
def atan2(ctx: OpContext) -> np.ndarray:
    """atan2(y, x) element-wise, y and x of one shape (TFLite does not broadcast it)."""
    y, x = required_input(ctx, 0, "y"), required_input(ctx, 1, "x")
    require_dtype(ctx, y, (np.float32, np.float64), "y")
    if x.dtype != y.dtype:
        raise op_error(ctx, f"y is {y.dtype.name} but x is {x.dtype.name}")
    # NOTE: LiteRT checks only that the ranks agree and then reads x at y's offsets, out of
    # bounds when the shapes differ; refused here.
    if x.shape != y.shape:
        raise op_error(ctx, f"y {list(y.shape)} and x {list(x.shape)} must have one shape")
    return np.arctan2(y, x)


def _bitwise_pair(ctx: OpContext) -> tuple[np.ndarray, np.ndarray]:
    a, b = required_input(ctx, 0, "input 0"), required_input(ctx, 1, "input 1")
    require_dtype(ctx, a, BITWISE_TYPES, "input 0")
    if a.dtype != b.dtype:
        raise op_error(ctx, f"input types {a.dtype.name} and {b.dtype.name} differ")
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError as exc:
        raise op_error(ctx, f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from exc
    return a, b


@register("BITWISE_XOR", versions=(1,))
def bitwise_xor(ctx: OpContext) -> np.ndarray:
    """a ^ b with broadcasting (8-, 16-, 32-bit integers, signed or not)."""
    a, b = _bitwise_pair(ctx)
    return np.bitwise_xor(a, b)


@register("RIGHT_SHIFT", versions=(1,))
def right_shift(ctx: OpContext) -> np.ndarray:
    """a >> b with broadcasting, arithmetic for signed types; b is clamped to
    [0, bits - 1] as TFLite does (8-, 16-, 32-bit integers, signed or not)."""
    a, b = _bitwise_pair(ctx)
    shift = np.clip(b.astype(np.int64), 0, a.dtype.itemsize * 8 - 1).astype(a.dtype)
    return np.right_shift(a, shift)


# -- shapes and bits ------------------------------------------------------------------------


@register("BITCAST", versions=(1,))
def bitcast(ctx: OpContext) -> np.ndarray:
    """The input's bytes read as the output's type: a wider input gains a last axis of
    size ratio, a narrower one loses its last axis, which must equal the ratio."""
    x = required_input(ctx, 0, "input")
    out_dtype = ctx.out_tensors[0].dtype
    if "O" in (x.dtype.kind, out_dtype.kind):
        raise op_error(ctx, "string tensors cannot be bitcast")
    src, dst = x.dtype.itemsize, out_dtype.itemsize
    if src > dst:
        shape = (*x.shape, src // dst)
    elif src < dst:
        if x.ndim == 0 or x.shape[-1] != dst // src:
            raise op_error(
                ctx,
                f"a {x.dtype.name} input {list(x.shape)} bitcast to {out_dtype.name} needs a "
                f"last dimension of {dst // src}",
            )
        shape = x.shape[:-1]
    else:
        shape = x.shape
    return np.ascontiguousarray(x).view(out_dtype).reshape(shape)


@register("RANK", versions=(1,))
def rank(ctx: OpContext) -> np.ndarray:
    """The input's number of dimensions as an int32 scalar."""
    return np.array(required_input(ctx, 0, "input").ndim, np.int32)


@register("BROADCAST_ARGS", versions=(1,))
def broadcast_args(ctx: OpContext) -> np.ndarray:
    """The shape two shapes (1-D int32 or int64 tensors) broadcast to."""
    s1, s2 = required_input(ctx, 0, "shape 1"), required_input(ctx, 1, "shape 2")
    require_dtype(ctx, s1, (np.int32, np.int64), "shape 1")
    if s2.dtype != s1.dtype:
        raise op_error(ctx, f"shape types {s1.dtype.name} and {s2.dtype.name} differ")
    if s1.ndim != 1 or s2.ndim != 1:
        raise op_error(
            ctx, f"shapes must be 1-D tensors, got {list(s1.shape)} and {list(s2.shape)}"
        )
    n = max(s1.size, s2.size)
    a = np.concatenate([np.ones(n - s1.size, np.int64), s1.astype(np.int64)])
    b = np.concatenate([np.ones(n - s2.size, np.int64), s2.astype(np.int64)])
    clash = (a != b) & (a != 1) & (b != 1)
    if np.any(clash):
        raise op_error(ctx, f"shapes {s1.tolist()} and {s2.tolist()} do not broadcast")
    return np.where(a == 1, b, a).astype(s1.dtype)


# -- FAKE_QUANT -----------------------------------------------------------------------------


def _round_half_away(x: np.ndarray | np.float32) -> np.ndarray:
    """std::round: to nearest, ties away from zero, exactly (x + 0.5 would round first)."""
    whole = np.trunc(x)
    return whole + np.copysign(np.abs(x - whole) >= 0.5, x).astype(np.result_type(x))


def _nudged_range(
    lo: np.float32, hi: np.float32, num_bits: int
) -> tuple[np.float32, np.float32, np.float32]:
    """(nudged min, nudged max, scale): [lo, hi] moved so that 0.0 is exactly representable,
    in float32 as TFLite's NudgeQuantizationRange."""
    qmin, qmax = np.float32(0), np.float32((1 << num_bits) - 1)
    scale = np.float32((hi - lo) / (qmax - qmin))
    zero_from_min = np.float32(qmin - lo / scale)
    if zero_from_min < qmin:
        zero = qmin
    elif zero_from_min > qmax:
        zero = qmax
    else:
        zero = _round_half_away(zero_from_min)
    return np.float32((qmin - zero) * scale), np.float32((qmax - zero) * scale), scale


@register("FAKE_QUANT", versions=(1, 2))
def fake_quant(ctx: OpContext) -> np.ndarray:
    """x clamped to the nudged [min, max] and snapped to its num_bits quantization grid
    (float32). narrow_range is refused, as TFLite refuses it at runtime."""
    x = _float32_input(ctx)
    if ctx.opt("narrow_range", False):
        raise op_error(ctx, "narrow_range is not supported at runtime (TFLite refuses it too)")
    num_bits = int(ctx.opt("num_bits", 8))
    if not FAKE_QUANT_BITS[0] <= num_bits <= FAKE_QUANT_BITS[1]:
        raise op_error(
            ctx, f"num_bits {num_bits} is outside {FAKE_QUANT_BITS[0]}..{FAKE_QUANT_BITS[1]}"
        )
    lo, hi = np.float32(ctx.opt("min", 0.0)), np.float32(ctx.opt("max", 0.0))
    if not lo < hi:
        raise op_error(ctx, f"min {lo} must be below max {hi}")
    nudged_min, nudged_max, scale = _nudged_range(lo, hi, num_bits)
    inv_scale = np.float32(np.float32(1) / scale)
    # std::max(nudged_min, v) then std::min(nudged_max, v): NaN becomes nudged_min
    clamped = np.where(x > nudged_min, x, nudged_min)
    clamped = np.where(clamped < nudged_max, clamped, nudged_max).astype(F32)
    steps = ((clamped - nudged_min) * inv_scale).astype(F32)
    return (_round_half_away(steps) * scale + nudged_min).astype(F32)
