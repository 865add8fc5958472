"""Lower delegated nodes to OpenCL launches (the float view of the partition).

Every runtime tensor of a partition is float (fp32 or fp16 storage). Quantized models run
as TFLite's delegate runs them: constants dequantized here, once; after every tensor with
quantization parameters a quantize-and-dequantize launch snaps values to its grid.
Each op's own lowering is in its record (`gpu/opencl/records/`); the `Lowerer` holds what they
share: constants, launches, what the node being lowered absorbed, concatenation views,
the epilogue's arguments, and, each in a module of its own, the elementwise launches
(elementwise_lowering.py) and the tiled GEMM (gemm_lowering.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...errors import ModelError
from ...graph import Operator, Subgraph, Tensor
from ...ops.common import dequantize
from ..switches import DEFAULTS, Switches
from . import elementwise_lowering, squeeze_excite
from .chain import Chain
from .codes import Act, Binary, Step, Unary
from .concat_views import ConcatPlan, View, plan_concat_views
from .fusions import plan_fusion
from .fusions.epilogue import MAX_STEPS
from .gemm_lowering import lower_gemm
from .launch import (
    LOCAL_1D,
    Buf,
    Const,
    Launch,
    Lowered,
    round_up,
)
from .lowering_api import StepSpec
from .records import record_for
from .schedule import launch_order


class Lowerer:
    """Turns the nodes of one partition into launches."""

    def __init__(
        self,
        sg: Subgraph,
        compute_units: int,
        precision: str = "fp32",
        gemm_groups_per_cu: int | None = None,
        switches: Switches = DEFAULTS,
    ):
        self.sg = sg
        self.compute_units = compute_units
        self.gemm_groups_per_cu = gemm_groups_per_cu
        #: the session's switches: the GEMMs' split rules, the records' thresholds
        self.switches = switches
        self.precision = precision
        self.out = Lowered()
        self.steps: list[StepSpec] = []  #: the epilogue of the node being lowered
        #: (input, per-channel scale) of the node being lowered, when it absorbed a gate MUL
        #: (input it reads, per-channel gate, QDQ params snapping the product or None)
        self.input_scale: tuple[int, int, tuple[float, float, float, float] | None] | None = None
        #: (input, scale, shift, low, high) of the node being lowered, when it absorbed a
        #: constant MUL and ADD before it: it reads clamp(input * scale + shift, low, high)
        self.input_affine: tuple[int, int, int, float, float] | None = None
        #: tensor -> (tensor, low, high): the node being lowered reads the first as the
        #: second clamped (an elided RELU, fusions/relu_into_readers.py)
        self.clamped: dict[int, tuple[int, float, float]] = {}
        #: (input, top, left) of the node being lowered, when it absorbed a PAD before it
        self.input_pad: tuple[int, int, int] | None = None
        #: the depthwise node whose output the node being lowered computes as it loads it
        self.input_depthwise: int | None = None
        #: the MEAN node whose output the node being lowered computes as it loads it
        self.input_mean: int | None = None
        #: tensors living inside a concatenation's output (opencl/concat_views.py)
        self.views = ConcatPlan({}, {}, set())
        #: slots a GEMM wrote in place (their concatenation copies the others)
        self.in_place: set[int] = set()

    # -- helpers ----------------------------------------------------------------------

    def t(self, i: int) -> Tensor:
        return self.sg.tensors[i]

    def const_float(self, i: int) -> np.ndarray:
        """A constant as float32: int8/uint8 dequantized, fp16 widened."""
        t = self.t(i)
        data = t.data
        if data is None:
            raise ModelError(f"tensor {i} '{t.name}' must be constant on the GPU")
        if data.dtype.kind in "iu" and t.quantization is not None:
            return dequantize(np.asarray(data), t.quantization)
        return np.asarray(data, dtype=np.float32)

    def add_const(self, key: str, value: np.ndarray) -> Const:
        self.out.consts[key] = np.ascontiguousarray(value)
        return Const(key)

    def operand(self, i: int) -> Buf | Const:
        return self.add_const(f"t{i}", self.const_float(i)) if self.t(i).is_constant else Buf(i)

    def bias(self, op: Operator, pos: int, n: int) -> Const:
        if len(op.inputs) > pos and op.inputs[pos] >= 0:
            return self.add_const(f"t{op.inputs[pos]}", self.const_float(op.inputs[pos]).reshape(n))
        return self.add_const(f"zeros{n}", np.zeros(n, np.float32))

    def emit(
        self,
        op: Operator,
        kernel: str,
        args: list[Any],
        gsize: tuple[int, ...],
        lsize: tuple[int, ...] | None,
    ) -> None:
        self.out.launches.append(Launch(kernel, args, gsize, lsize, op.index))

    def emit_1d(self, op: Operator, kernel: str, args: list[Any], n: int) -> None:
        self.emit(op, kernel, args, (round_up(max(n, 1), LOCAL_1D),), (LOCAL_1D,))

    def activation(self, op: Operator, out: int) -> None:
        """A separate activation launch, for ops whose kernel does not fuse it."""
        elementwise_lowering.activation(self, op, out)

    def qdq(self, op: Operator, out: int) -> None:
        """Quantize-and-dequantize after a tensor with quantization parameters."""
        elementwise_lowering.qdq(self, op, out)

    # -- ops --------------------------------------------------------------------------

    def lower(self, op: Operator) -> None:
        """Append the launches of `op` alone (its record's lowering), then snap quantized
        outputs."""
        self._record(op).lower(self, op)
        if op.index in self.views.concats:
            return  # its inputs are on its output's grid already (concat_views.py)
        for out in op.outputs:
            self.qdq(op, out)

    def lower_partition(self, nodes: list[int], leaving: set[int]) -> None:
        """Append the launches of a partition's nodes, each elementwise chain fused into
        the kernel producing its input (opencl/fusions/); `leaving`: the tensors read
        after the partition."""
        chains = plan_fusion(self.sg, nodes, leaving, self.switches)
        fused = {n: chain.nodes for n, chain in chains.items()}
        absorbed = {m for members in fused.values() for m in members}
        # a GEMM scaling its input as it loads it (a gate, a BatchNorm) reads it with a row
        # stride: the MUL it absorbed may read a view
        gemm_muls = {c.before[0] for c in chains.values() if c.input_affine or c.input_scale}
        if self.switches.concat_views:  # the concat_views pass (gpu/passes.py)
            self.views = plan_concat_views(self.sg, nodes, leaving, absorbed, gemm_muls)
        for t, view in self.views.prefix.items():
            self.out.alias[t] = view.root
        elided = {r for c in chains.values() for r in c.clamps}  # their readers clamp
        for n in launch_order(self.sg, nodes, fused):
            op = self.sg.operators[n]
            chain = chains.get(n)
            if n in elided:
                continue
            if chain is None:
                self.lower(op)
                continue
            if chain.output != op.outputs[0]:
                self.out.alias[op.outputs[0]] = chain.output  # the kernel writes the end
            first = len(self.out.launches)
            with self._absorbing(chain):
                if chain.then:
                    squeeze_excite.lower(self, op, chain)
                else:
                    self._record(op).lower(self, op)
            for launch in self.out.launches[first:]:
                launch.covers = (n, *chain.nodes, *chain.clamps)

    @contextmanager
    def _absorbing(self, chain: Chain) -> Iterator[None]:
        """While the producer of `chain` is lowered: what it absorbed (its epilogue steps,
        what it reads its input through), as its record reads them; nothing after."""
        self.steps, self.input_scale = chain.steps, chain.input_scale
        self.input_pad, self.input_depthwise = chain.input_pad, chain.input_depthwise
        self.input_mean, self.input_affine = chain.input_mean, chain.input_affine
        self.clamped = chain.clamped
        try:
            yield
        finally:
            self.steps, self.input_scale = [], None
            self.input_pad, self.input_depthwise, self.input_mean = None, None, None
            self.input_affine, self.clamped = None, {}

    def view(self, t: int) -> View | None:
        """Where tensor t lives inside a concatenation's output, if it does."""
        if t in self.views.prefix:
            return self.views.prefix[t]
        return self.views.slots[t] if t in self.in_place else None

    def store_view(self, out: Any) -> tuple[int, int] | None:
        """(pixel stride, first channel) for a kernel writing `out` into its
        concatenation's slot, which it then does (recorded), or None. Kernels that can:
        the GEMMs (ldc, coff), binary4d and pool2d (oview)."""
        if not isinstance(out, Buf):
            return None
        t = out.tensor
        while t in self.out.alias:  # a fused chain's kernel writes the chain's end
            t = self.out.alias[t]
        slot = self.views.slots.get(t)
        if slot is None:
            return None
        self.in_place.add(t)
        self.out.alias[t] = slot.root
        return slot.stride, slot.offset

    def oview(self, out: Any, channels: int) -> np.ndarray:
        """The int2 `oview` argument of a kernel writing `out` of `channels` channels."""
        return np.array(self.store_view(out) or (channels, 0), np.int32)

    def _record(self, op: Operator):
        record = record_for(op.op)
        if record is None:
            raise ModelError(f"{op.describe()} has no GPU kernel")
        return record

    def padded_input(self, x: int, pad_t: int, pad_l: int) -> tuple[int, int, int]:
        """The tensor a convolution reads and its top and left padding, counting a PAD
        before it that it absorbed (it then reads the PAD's input, bounds-checked)."""
        if self.input_pad is None:
            return x, pad_t, pad_l
        source, top, left = self.input_pad
        return source, pad_t + top, pad_l + left

    def epilogue(self, act: int) -> list[Any]:
        """The EPILOGUE_PARAMS arguments: the fused activation, then the node's steps
        (unused ones STEP_NONE)."""
        if len(self.steps) > MAX_STEPS:
            raise ValueError(f"{len(self.steps)} epilogue steps; a kernel takes {MAX_STEPS}")
        args: list[Any] = [np.int32(Act(act))]
        for i in range(MAX_STEPS):
            spec = self.steps[i] if i < len(self.steps) else StepSpec(Step.NONE)
            if spec.operand is None:
                operand: Any = self.add_const("epilogue_none", np.zeros(1, np.float32))
            else:
                operand = self.operand(spec.operand)
            code = np.array([Step(spec.code), spec.source], np.int32)
            args += [code, operand, np.array(spec.params, np.float32)]
        return args

    def unary(self, op: Operator, code: Unary, param: float = 0.0) -> None:
        """The `unary` launch of `code`; `param`: its parameter (LEAKY_RELU's alpha)."""
        elementwise_lowering.unary(self, op, code, param)

    def broadcast_strides(self, i: int, out_shape: tuple[int, ...]) -> np.ndarray:
        """The int4 strides reading tensor `i` broadcast to the 4-D `out_shape`."""
        return elementwise_lowering.broadcast_strides(self, i, out_shape)

    def binary(self, op: Operator, code: Binary) -> None:
        """The `binary4d` launch of `code`, its operands broadcast, its epilogue fused."""
        elementwise_lowering.binary(self, op, code)

    #: The tiled GEMM (gemm_lowering.py; Lowering.gemm says its arguments).
    gemm = lower_gemm
