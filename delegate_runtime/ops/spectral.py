"""Complex-valued ops of audio front ends: RFFT2D, REAL, IMAG, COMPLEX_ABS."""

from __future__ import annotations

import numpy as np

from .registry import OpContext, register
from .shape import check_output, op_error, require_dtype, required_input

#: The real part type of each complex type (REAL, IMAG, COMPLEX_ABS outputs).
REAL_TYPE = {
    np.dtype(np.complex64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.float64),
}


@register("RFFT2D", versions=(1,))
def rfft2d(ctx: OpContext) -> np.ndarray:
    """The 2-D real FFT of the innermost two axes (float32 in, complex64 out), each slice
    cropped or zero-padded to fft_length = [height, width] (powers of two): the output's
    innermost axes are [height, width / 2 + 1], as tf.signal.rfft2d."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, (np.float32,))
    if x.ndim < 2:
        raise op_error(ctx, f"input must have at least 2 dimensions, got {list(x.shape)}")
    fft_length = required_input(ctx, 1, "fft_length")
    require_dtype(ctx, fft_length, (np.int32,), "fft_length")
    if fft_length.shape != (2,):
        raise op_error(ctx, f"fft_length must have shape [2], got {list(fft_length.shape)}")
    height, width = (int(v) for v in fft_length)
    for name, n in (("height", height), ("width", width)):
        if n <= 0 or n & (n - 1):
            raise op_error(ctx, f"fft_length {name} {n} is not a positive power of two")
    batch = x.shape[:-2]
    check_output(ctx, (*batch, height, width), np.float64, "zero-padded input")
    check_output(ctx, (*batch, height, width // 2 + 1), np.complex128)
    # NOTE: LiteRT's kernel (fft2d's rdft2d) returns wrong values for width 1 (imag = -real);
    # this is the transform itself, as TensorFlow computes it.
    out = np.fft.rfft2(x.astype(np.float64), s=(height, width), axes=(-2, -1))
    return out.astype(np.complex64)


def _complex_input(ctx: OpContext) -> np.ndarray:
    """The complex input, after checking that the output is its real part type."""
    x = required_input(ctx, 0, "input")
    require_dtype(ctx, x, REAL_TYPE)
    want, got = REAL_TYPE[x.dtype], ctx.out_tensors[0].dtype
    if got != want:
        raise op_error(ctx, f"a {x.dtype.name} input needs a {want.name} output, got {got.name}")
    return x


@register("REAL", versions=(1,))
def real(ctx: OpContext) -> np.ndarray:
    """The real part of a complex64 (complex128) tensor, as float32 (float64)."""
    return np.ascontiguousarray(_complex_input(ctx).real)


@register("IMAG", versions=(1,))
def imag(ctx: OpContext) -> np.ndarray:
    """The imaginary part of a complex64 (complex128) tensor, as float32 (float64)."""
    return np.ascontiguousarray(_complex_input(ctx).imag)


@register("COMPLEX_ABS", versions=(1,))
def complex_abs(ctx: OpContext) -> np.ndarray:
    """The magnitude |a + bi| = hypot(a, b) of a complex64 (complex128) tensor, as float32
    (float64)."""
    return np.abs(_complex_input(ctx))
