"""One cap on what kernels allocate from runtime values (sizes, paddings, multiples,
indices): the reader's `Limits`, so a 1 KB model cannot ask the host for 20 GiB.

Kernels call `check_alloc` with the shape they are about to create, before creating it.
The interpreter makes its own `Limits` the active ones while a kernel runs; kernels run
outside an interpreter (constant folding) get the reader's defaults.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

from ..errors import ModelError
from ..limits import DEFAULT_LIMITS, Limits

_ACTIVE: ContextVar[Limits] = ContextVar("devicefarm_kernel_limits", default=DEFAULT_LIMITS)

#: Ops whose output is the broadcast of their inputs' shapes (elementwise and select).
BROADCASTING_OPS = frozenset(
    (
        "ADD",
        "SUB",
        "MUL",
        "DIV",
        "POW",
        "MAXIMUM",
        "MINIMUM",
        "SQUARED_DIFFERENCE",
        "FLOOR_DIV",
        "FLOOR_MOD",
        "EQUAL",
        "NOT_EQUAL",
        "GREATER",
        "GREATER_EQUAL",
        "LESS",
        "LESS_EQUAL",
        "LOGICAL_AND",
        "LOGICAL_OR",
        "PRELU",
        "SELECT",
        "SELECT_V2",
        "BITWISE_XOR",
        "RIGHT_SHIFT",
    )
)


def active_limits() -> Limits:
    """The limits kernels check against now."""
    return _ACTIVE.get()


@contextmanager
def kernel_limits(limits: Limits) -> Iterator[None]:
    """Make `limits` the active ones for the kernels run inside the block."""
    token = _ACTIVE.set(limits)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def check_alloc(shape: Iterable[int], dtype: np.dtype | type, what: str) -> None:
    """ModelError naming `what` unless an array of `shape` fits the active limits.

    Dimensions are Python ints, so a product past 2**63 is seen, not wrapped."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ModelError(f"{what}: negative dimension in shape {dims}")
    elements = math.prod(dims)
    limits = _ACTIVE.get()
    size = elements * np.dtype(dtype).itemsize
    if elements > limits.max_tensor_elements:
        raise ModelError(
            f"{what}: shape {dims} is {elements} elements ({human_bytes(size)}), over the cap of "
            f"{limits.max_tensor_elements} elements per tensor"
        )
    if size > limits.max_tensor_bytes:
        raise ModelError(
            f"{what}: shape {dims} of {np.dtype(dtype)} is {human_bytes(size)}, over the cap of "
            f"{human_bytes(limits.max_tensor_bytes)} per tensor"
        )


def check_broadcast(shapes: Iterable[tuple[int, ...]], dtype: np.dtype | type, what: str) -> None:
    """check_alloc of the shape that `shapes` broadcast to (nothing when they do not
    broadcast: the kernel reports that)."""
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        return
    check_alloc(shape, dtype, what)


def human_bytes(n: int) -> str:
    """`n` bytes as people read them (`1.5 GiB`)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
