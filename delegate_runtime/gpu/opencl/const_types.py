"""Which constants a partition keeps in float32 whatever its storage: those its kernels
read through a `float*` parameter, the biases (every kernel's `bias`, the depthwise
biases `DB`/`db`, squeeze-excite's `b1`/`b2`), and the weights its kernels read through
`weight_t*` (the filters: GEMM's `B`, the depthwise `w`/`DW`/`dw`, squeeze-excite's
`w1`/`w2`).

With half storage every other constant (an elementwise operand) is rounded to half like
the activations. Biases and weights are not: rounded to half, each carries up to 2^-11 of
its own magnitude into every output it reaches. On NASNetMobile (PoCL, float32
activations, LiteRT's reference kernels), biases rounded to half alone cost 3.8e-03 of
the output's range, the weights 8.7e-03 (docs/notebook/15-2026-11-28-one-allocation-per-partition-every-launch-a-copy.md). A model whose weights are
all half values already (a file with fp16 weights) reads them in half: float32 would
only double their bytes (`weights_in_half`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .cl_source import kernel_params
from .launch import Const, Lowered
from .specialize import generic_name

#: The suffix of a float32 twin of a constant that some kernel reads in the storage type.
FLOAT32_TWIN = ":f32"


def _const_reads(source: str, lowered: Lowered) -> Iterator[tuple[int, int, str, str]]:
    """(launch, argument position, pointee type, key) of every constant `lowered`'s
    launches pass through a global pointer parameter."""
    for i, launch in enumerate(lowered.launches):
        params = kernel_params(source, generic_name(launch.kernel))
        for pos, (param, arg) in enumerate(zip(params, launch.args, strict=True)):
            if isinstance(arg, Const) and param.global_pointer:
                yield i, pos, param.pointee, arg.key


def weights_in_half(source: str, lowered: list[Lowered]) -> bool:
    """Whether a half-storage session reads its weights (the constants its kernels read
    through `weight_t*`) in half (the program then built with HALF_WEIGHTS, see
    build_options): only where every weight is a half value already, so half loses
    nothing."""
    for part in lowered:
        weights = {
            key for _, _, pointee, key in _const_reads(source, part) if pointee == "weight_t"
        }
        if not all(_is_half(part.consts[key]) for key in weights):  # each constant once
            return False
    return True


def _is_half(values: np.ndarray) -> bool:
    if values.dtype.kind != "f":
        return True
    with np.errstate(over="ignore"):  # beyond half's range: inf, unequal
        return bool(np.array_equal(values.astype(np.float16).astype(values.dtype), values))


def float32_consts(source: str, lowered: Lowered, half_weights: bool = False) -> set[str]:
    """The keys of `lowered`'s constants read as float32 (weights too, unless
    `half_weights`: weights_in_half). A constant read both ways gets a float32 twin (its
    key + FLOAT32_TWIN) for the float readers, in place."""
    as_float: dict[str, list[tuple[int, int]]] = {}
    as_storage: set[str] = set()
    for i, pos, pointee, key in _const_reads(source, lowered):
        if pointee == "float" or (pointee == "weight_t" and not half_weights):
            as_float.setdefault(key, []).append((i, pos))
        elif pointee in ("store_t", "weight_t"):
            as_storage.add(key)
    for key in as_float.keys() & as_storage:
        twin = key + FLOAT32_TWIN
        lowered.consts[twin] = lowered.consts[key]
        for i, pos in as_float.pop(key):
            lowered.launches[i].args[pos] = Const(twin)
        as_float[twin] = []
    return set(as_float)
