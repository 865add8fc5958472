"""One-op models for op tests: runtime inputs, constants, outputs, one builder call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from delegate_runtime.builder import ModelBuilder, Quant


@dataclass
class In:
    """A runtime input (fed at invoke)."""

    value: np.ndarray
    quant: Quant | None = None


@dataclass
class Const:
    """A constant input."""

    value: Any
    dtype: Any = np.int32
    quant: Quant | None = None


def one_op(
    op: str, args: list, outs: list, version: int = 1, **options: Any
) -> tuple[bytes, list[np.ndarray]]:
    """(model bytes, runtime inputs) of one `op`. `args` are In, Const or None (an absent
    optional input); `outs` are (shape, dtype[, quant])."""
    b = ModelBuilder()
    g = b.main
    ids, feeds = [], []
    for i, a in enumerate(args):
        if a is None:
            ids.append(-1)
        elif isinstance(a, Const):
            ids.append(g.const(f"c{i}", np.asarray(a.value, a.dtype), quant=a.quant))
        else:
            ids.append(g.input(f"x{i}", a.value.shape, a.value.dtype, quant=a.quant))
            feeds.append(a.value)
    out_ids = [
        g.tensor(f"y{i}", o[0], o[1], quant=(o[2] if len(o) > 2 else None))
        for i, o in enumerate(outs)
    ]
    g.op(op, ids, out_ids, version=version, **options)
    g.output(*out_ids)
    return b.build(), feeds


def random_array(rng: np.random.Generator, shape: Any, dtype: Any = np.float32) -> np.ndarray:
    """Random values over the dtype's range (bool, integers) or standard normal (floats)."""
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)
