"""Random model inputs drawn the way TFLite's tools draw them.

- `benchmark_inputs`: `benchmark_model`'s uniform ranges (floats in [-0.5, 0.5], uint8
  in [0, 254], int8 in [-127, 127], other integers in [0, 99], bools 0/1).
- `diff_inputs`: the inference-diff profiler's truncated normal (mean 0.5, std 1/3,
  redrawn outside [0, 1)) mapped into the input range: floats into [-1, 1], integers over
  their whole range.
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..graph import Model, Tensor

#: benchmark_model's default value ranges per dtype kind (inclusive).
BENCHMARK_FLOAT_RANGE = (-0.5, 0.5)
BENCHMARK_INT_RANGES = {
    np.dtype(np.uint8): (0, 254),
    np.dtype(np.int8): (-127, 127),
}
BENCHMARK_OTHER_INT_RANGE = (0, 99)
#: The inference diff maps its normal samples into this range for float inputs.
DIFF_FLOAT_RANGE = (-1.0, 1.0)


def input_tensors(model: Model, subgraph: int = 0) -> list[Tensor]:
    sg = model.subgraphs[subgraph]
    return [sg.tensors[t] for t in sg.inputs]


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(max(int(d), 1) for d in t.shape)


def _check_dtype(t: Tensor) -> None:
    if t.dtype == np.dtype(object) or t.dtype.kind == "c":
        raise ModelError(f"input '{t.name}' of type {t.dtype} cannot be filled with random data")


def benchmark_inputs(model: Model, rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per input of subgraph 0, as benchmark_model fills them."""
    out = []
    for t in input_tensors(model):
        _check_dtype(t)
        shape = _shape(t)
        if t.dtype.kind == "f":
            lo, hi = BENCHMARK_FLOAT_RANGE
            out.append(rng.uniform(lo, hi, shape).astype(t.dtype))
        elif t.dtype.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(np.bool_))
        else:
            lo, hi = BENCHMARK_INT_RANGES.get(t.dtype, BENCHMARK_OTHER_INT_RANGE)
            out.append(rng.integers(lo, hi, shape, endpoint=True).astype(t.dtype))
    return out


def truncated_unit_normal(rng: np.random.Generator, size: int) -> np.ndarray:
    """Samples of N(0.5, 1/3) redrawn until all lie in [0, 1)."""
    out = rng.normal(0.5, 1.0 / 3.0, size)
    bad = (out < 0) | (out >= 1)
    while bad.any():
        out[bad] = rng.normal(0.5, 1.0 / 3.0, int(bad.sum()))
        bad = (out < 0) | (out >= 1)
    return out


def diff_inputs(model: Model, rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per input, drawn as TFLite's inference diff draws them."""
    out = []
    for t in input_tensors(model):
        _check_dtype(t)
        shape = _shape(t)
        u = truncated_unit_normal(rng, int(np.prod(shape, dtype=np.int64))).reshape(shape)
        if t.dtype.kind == "f":
            lo, hi = DIFF_FLOAT_RANGE
            out.append((lo + (hi - lo) * u).astype(t.dtype))
        elif t.dtype.kind == "b":
            out.append(u >= 0.5)
        else:
            info = np.iinfo(t.dtype)
            lo, hi = float(info.min), float(info.max)
            # C++ static_cast<T>(float) truncates toward zero.
            out.append(np.trunc(lo + (hi - lo) * u).astype(t.dtype))
    return out
