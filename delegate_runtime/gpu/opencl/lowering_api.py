"""What an op's record sees of the lowering: the `Lowering` it is handed to append its
launches, and the epilogue steps it may absorb. Records depend on this and on `launch`
and `codes`, never on `lowering` itself, so the backend's modules form no cycle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...graph import Operator, Subgraph, Tensor
from ..switches import Switches
from .codes import Binary, Unary
from .concat_views import ConcatPlan, View
from .launch import Buf, Const, Lowered


@dataclass(frozen=True)
class StepSpec:
    """One elementwise step of a producer's epilogue: a STEP_* code, where its operand
    comes from (a FROM_* code) and which tensor it is, and up to four float parameters."""

    code: int
    source: int = 0
    operand: int | None = None  #: a tensor index (constant or runtime)
    params: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ReadA:
    """How a GEMM reads A. `scale`: a K-vector multiplying A's columns as they are loaded;
    `snap`: the QDQ step's (lo, hi, scale, 0) that snaps each product to an int8 grid after
    it; `depthwise`: A is the output of a depthwise convolution whose input is `a`,
    computed as it is loaded (records/depthwise.py's `prologue_args` after the input);
    `patch`: A's rows are a convolution's patches of `a`, at this int16 geometry
    (records/conv.py: patch_geometry); `mean`: A is the mean of `a` over its (pixels,
    channels) = mean (gemm.cl.in's mgeo); `affine`: (a 2K-vector of scales then shifts,
    low, high): A is read as clamp(a * scale + shift, low, high). None of them: A as it is,
    with its row stride where it lives in a concatenation's output."""

    scale: Any = None
    snap: tuple[float, float, float, float] | None = None
    depthwise: list[Any] | None = None
    patch: np.ndarray | None = None
    mean: np.ndarray | None = None
    affine: tuple[Any, float, float] | None = None

    @property
    def computed(self) -> bool:
        """Whether A is computed as it is loaded (dearer to load: K splits sooner)."""
        return self.depthwise is not None or self.mean is not None

    @property
    def plain(self) -> bool:
        """Whether A is read from a buffer of its own shape (not computed, not patches)."""
        return self.depthwise is None and self.patch is None and self.mean is None


#: A GEMM reading A as it is.
PLAIN = ReadA()


class Lowering(Protocol):
    """The lowering of one partition as a record's `lower` uses it (lowering.Lowerer)."""

    sg: Subgraph
    compute_units: int
    precision: str
    switches: Switches  #: the session's (gpu/switches.py)
    #: work groups a GEMM aims for per compute unit (None: the switches' own)
    gemm_groups_per_cu: int | None
    out: Lowered  #: the launches, constants and aliases made so far
    steps: list[StepSpec]  #: the epilogue of the node being lowered
    #: what the node being lowered absorbed before it (lowering.Lowerer says each)
    input_scale: tuple[int, int, tuple[float, float, float, float] | None] | None
    input_affine: tuple[int, int, int, float, float] | None
    clamped: dict[int, tuple[int, float, float]]
    input_pad: tuple[int, int, int] | None
    input_depthwise: int | None
    input_mean: int | None
    views: ConcatPlan

    def t(self, i: int) -> Tensor: ...

    def const_float(self, i: int) -> np.ndarray: ...

    def add_const(self, key: str, value: np.ndarray) -> Const: ...

    def operand(self, i: int) -> Buf | Const: ...

    def bias(self, op: Operator, pos: int, n: int) -> Const: ...

    def emit(
        self,
        op: Operator,
        kernel: str,
        args: list[Any],
        gsize: tuple[int, ...],
        lsize: tuple[int, ...] | None,
    ) -> None: ...

    def emit_1d(self, op: Operator, kernel: str, args: list[Any], n: int) -> None: ...

    def activation(self, op: Operator, out: int) -> None: ...

    def view(self, t: int) -> View | None: ...

    def store_view(self, out: Any) -> tuple[int, int] | None: ...

    def oview(self, out: Any, channels: int) -> np.ndarray: ...

    def padded_input(self, x: int, pad_t: int, pad_l: int) -> tuple[int, int, int]: ...

    def epilogue(self, act: int) -> list[Any]: ...

    def unary(self, op: Operator, code: Unary, param: float = 0.0) -> None: ...

    def broadcast_strides(self, i: int, out_shape: tuple[int, ...]) -> np.ndarray: ...

    def binary(self, op: Operator, code: Binary) -> None: ...

    def gemm(
        self,
        op: Operator,
        buffers: tuple[Any, Any, Any, Any],
        dims: tuple[int, int, int],
        act: int,
        read: ReadA = PLAIN,
    ) -> None:
        """The tiled GEMM's launch (gemm_lowering.lower_gemm): `buffers` (a, b, bias, out),
        `dims` (m, n, k), A read as `read` says."""
        ...
