"""The explicit, listable op registry of the numpy reference interpreter.

Each kernel declares the builtin op it handles and the versions it accepts. An op that is
missing here is an unknown op (ModelError before anything runs); an op that is here but
unsupported by a delegate falls back to these kernels.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..graph import Operator, Tensor

#: A kernel takes the op's context and returns its outputs, one array per output tensor.
KernelFn = Callable[["OpContext"], "Sequence[np.ndarray] | np.ndarray"]


@dataclass(frozen=True)
class Kernel:
    op: str
    versions: tuple[int, ...]
    fn: KernelFn
    doc: str = ""


REGISTRY: dict[str, Kernel] = {}


def register(op: str, versions: Sequence[int] | range = (1,)) -> Callable[[KernelFn], KernelFn]:
    """Decorator: register `fn` as the reference kernel of builtin `op` for `versions`."""

    def wrap(fn: KernelFn) -> KernelFn:
        if op in REGISTRY:
            raise RuntimeError(f"kernel for {op} registered twice")
        REGISTRY[op] = Kernel(op, tuple(versions), fn, (fn.__doc__ or "").strip())
        return fn

    return wrap


def lookup(op: str, version: int) -> tuple[Kernel | None, str]:
    """The kernel for (op, version), or None with the reason."""
    _load_kernels()
    kernel = REGISTRY.get(op)
    if kernel is None:
        return None, f"op {op} is not implemented by the reference interpreter"
    if version not in kernel.versions:
        return None, (
            f"op {op} version {version} is not supported (supported versions: "
            f"{', '.join(str(v) for v in kernel.versions)})"
        )
    return kernel, ""


def supported_ops() -> dict[str, tuple[int, ...]]:
    """Every op the reference interpreter runs, with its versions."""
    _load_kernels()
    return {name: k.versions for name, k in sorted(REGISTRY.items())}


@dataclass
class OpContext:
    """What a kernel sees: its operator, input arrays and tensors, and the interpreter."""

    op: Operator
    inputs: list[np.ndarray | None]
    in_tensors: list[Tensor | None]
    out_tensors: list[Tensor]
    run_subgraph: Callable[[int, list[np.ndarray]], list[np.ndarray]]
    variable_writes: dict[int, np.ndarray] = field(default_factory=dict)
    #: per-interpreter state of stateful kernels (CALL_ONCE, resource variables)
    state: dict[str, Any] = field(default_factory=dict)
    #: the op's intermediate tensors (a full-integer LSTM's gate and hidden quantizations)
    intermediates: list[Tensor] = field(default_factory=list)

    @property
    def options(self) -> dict[str, Any]:
        return self.op.options

    def opt(self, key: str, default: Any = None) -> Any:
        return self.op.options.get(key, default)

    def input(self, i: int) -> np.ndarray | None:
        """Input `i`, or None when it is absent (-1) or past the end."""
        return self.inputs[i] if i < len(self.inputs) else None

    def write_variable(self, input_position: int, value: np.ndarray) -> None:
        """Update a variable tensor fed as input `input_position` (LSTM states)."""
        tensor = self.in_tensors[input_position]
        if tensor is not None:
            self.variable_writes[tensor.index] = value


_LOADED = False
_LOAD_LOCK = threading.Lock()


def _load_kernels() -> None:
    """Import every kernel module once; threads wait until the registry is complete."""
    global _LOADED
    if _LOADED:
        return
    with _LOAD_LOCK:
        if not _LOADED:
            from . import _all  # noqa: F401  (registers every kernel module)

            _LOADED = True
