"""What lowering produces: launches of named kernels with their arguments, and helpers
for the shapes and work sizes they take."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ModelError

#: Work-group size of 1-D kernels.
LOCAL_1D = 128


@dataclass(frozen=True)
class Buf:
    """A runtime tensor's buffer (resolved through aliases by the memory plan)."""

    tensor: int


@dataclass(frozen=True)
class Const:
    """A constant buffer prepared at lowering time."""

    key: str


@dataclass(frozen=True)
class Staging:
    """Tensor `tensor`'s float32 buffer at a partition's edge (staging_edges.py)."""

    tensor: int


@dataclass(frozen=True)
class Local:
    """A __local memory argument of `nbytes`."""

    nbytes: int


@dataclass(frozen=True)
class Scratch:
    """A float scratch buffer of at least `nbytes`, shared by all launches (one queue)."""

    nbytes: int


@dataclass(frozen=True)
class Counters:
    """Zeroed int counters (one per GEMM tile), shared by all launches; kernels reset them."""

    count: int


#: Buffer arguments that lie in a partition's arena (opencl/arena.py).
IN_ARENA = (Buf, Const, Scratch, Counters)


@dataclass(frozen=True)
class CopyArgs:
    """How a specialized copy of a kernel (opencl/specialize.py) takes its launch's
    arguments: with `offsets`, the arena and the offsets of the buffers at those positions
    of the launch's arguments first (opencl/arena.py); then the arguments at `kept`."""

    offsets: tuple[int, ...]
    kept: tuple[int, ...]


@dataclass
class Launch:
    kernel: str
    args: list[Any]
    gsize: tuple[int, ...]
    lsize: tuple[int, ...] | None
    node: int
    #: every node whose work this launch does (the node itself and those fused into it)
    covers: tuple[int, ...] = ()
    #: set when `kernel` is a specialized copy: which arguments it still takes, and how
    copy_args: CopyArgs | None = None


@dataclass
class Lowered:
    launches: list[Launch] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)  #: float32 or int32 arrays
    alias: dict[int, int] = field(default_factory=dict)  #: tensor -> tensor sharing its buffer
    #: runs of launches that run as persistent kernels (opencl/persistent.py Run)
    runs: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class LoweredPartition:
    """One partition as lowered (lowering.py, staging_edges.py): its launches, the tensors
    it reads and writes, and the constants its kernels read as float32 (const_types.py)."""

    lowered: Lowered
    inputs: list[int]
    outputs: list[int]
    float_consts: frozenset[str] = frozenset()


def shape4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    if len(shape) > 4:
        raise ModelError(f"rank {len(shape)} is not supported on the GPU")
    return tuple([1] * (4 - len(shape)) + list(shape))  # type: ignore[return-value]


def i4(values: tuple[int, ...] | list[int]) -> np.ndarray:
    return np.array(list(values), dtype=np.int32)


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _pow2_at_most(n: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def grid3(d0: int, d1: int, d2: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Global and local sizes for a 3-D launch over (d0, d1, d2) with ~128-item groups."""
    lx = _pow2_at_most(d0, 32)
    ly = _pow2_at_most(d1, max(128 // lx, 1))
    return (round_up(d0, lx), round_up(d1, ly), d2), (lx, ly, 1)


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]
