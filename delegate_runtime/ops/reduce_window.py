"""REDUCE_WINDOW: a reduction over sliding windows (StableHLO's reduce_window as a TFLite
builtin, the deprecated form with ReduceWindowOptions).

Inputs: the tensor, a scalar init value, and constant int64 vectors of window dimensions,
window strides and window dilations (no base dilation, no padding). Each output element
starts at the init value and folds in its window's elements in row-major order, as
TFLite's kernel (tflite/kernels/stablehlo_reduce_window.cc) does; integer arithmetic wraps.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from .registry import OpContext, register
from .shape import check_output, data_input, op_error, require_dtype, required_input

_dt = np.dtype
#: Element types TFLite's kernel reduces.
REDUCE_WINDOW_TYPES = frozenset(
    _dt(t)
    for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float32, np.float64)
)
#: TFLite handles at most this many dimensions (kMaxReduceWindowRank).
MAX_RANK = 6
#: ReduceWindowFunction codes (schema enum) -> name.
FUNCTIONS = {1: "ADD", 2: "MUL", 3: "MINIMUM", 4: "MAXIMUM", 5: "ALL", 6: "ANY"}


def _fold(name: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """acc, x -> acc folded with x, elementwise."""
    if name == "ADD":
        return lambda acc, x: acc + x
    if name == "MUL":
        return lambda acc, x: acc * x
    if name == "MINIMUM":
        return lambda acc, x: np.where(acc <= x, acc, x)  # TFLite: a <= b ? a : b
    if name == "MAXIMUM":
        return lambda acc, x: np.where(acc >= x, acc, x)  # TFLite: a >= b ? a : b
    if name == "ALL":
        return lambda acc, x: (acc != 0) & (x != 0)
    return lambda acc, x: (acc != 0) | (x != 0)


def _window_vector(ctx: OpContext, i: int, what: str, rank: int) -> list[int]:
    v = required_input(ctx, i, what)
    require_dtype(ctx, v, (np.int64,), what)
    if v.shape != (rank,):
        raise op_error(ctx, f"{what} of shape {list(v.shape)} for an input of rank {rank}")
    if np.any(v <= 0):
        raise op_error(ctx, f"{what} {v.tolist()} must all be positive")
    return [int(d) for d in v]


@register("REDUCE_WINDOW", versions=(1,))
def reduce_window(ctx: OpContext) -> np.ndarray:
    """REDUCE_WINDOW: out[i] = init folded with input[i * stride + k * dilation] over every
    window position k, by the reduce_function (ADD, MUL, MINIMUM, MAXIMUM, ALL, ANY);
    output dim = (dim - (window - 1) * dilation - 1) // stride + 1, or 0 when the window
    does not fit."""
    x = data_input(ctx, 0, REDUCE_WINDOW_TYPES)
    init = required_input(ctx, 1, "init_value")
    if init.dtype != x.dtype or init.size != 1:
        raise op_error(ctx, f"init_value must be one {x.dtype.name} value")
    if not 1 <= x.ndim <= MAX_RANK:
        raise op_error(ctx, f"input rank {x.ndim} is outside [1, {MAX_RANK}]")
    window = _window_vector(ctx, 2, "window dimensions", x.ndim)
    strides = _window_vector(ctx, 3, "window strides", x.ndim)
    dilations = _window_vector(ctx, 4, "window dilations", x.ndim)
    code = int(ctx.opt("reduce_function", 0))
    name = FUNCTIONS.get(code)
    if name is None:
        raise op_error(ctx, f"reduce_function {code} is not supported")
    if x.dtype == np.bool_ and name in ("ADD", "MUL"):
        raise op_error(ctx, f"reduce_function {name} on bool is not supported")
    spans = [(w - 1) * d + 1 for w, d in zip(window, dilations, strict=True)]
    shape = tuple(
        0 if n < s else (n - s) // st + 1 for n, s, st in zip(x.shape, spans, strides, strict=True)
    )
    check_output(ctx, shape, x.dtype)
    wide = np.float64 if x.dtype == np.float64 else x.dtype
    if x.dtype.kind in "iu":
        wide = np.int64  # fold in int64, wrap to the type at the end (C++ int promotion)
    fold = _fold(name)
    acc = np.full(shape, init.reshape(()), wide)
    for offset in itertools.product(*(range(w) for w in window)):
        view = tuple(
            slice(k * d, k * d + (o - 1) * st + 1, st) if o else slice(0, 0)
            for k, d, o, st in zip(offset, dilations, shape, strides, strict=True)
        )
        with np.errstate(over="ignore"):
            acc = fold(acc, x[view].astype(wide))
    return acc.astype(x.dtype)
