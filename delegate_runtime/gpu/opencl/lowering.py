"""Lower delegated nodes to OpenCL launches (the float view of the partition).

Every runtime tensor of a partition is float (fp32 or fp16 storage). Quantized models run
as TFLite's delegate runs them: constants dequantized here, once; after every tensor with
quantization parameters a quantize-and-dequantize launch snaps values to its grid.
Each op's own lowering is in its record (`gpu/opencl/records/`); the `Lowerer` holds what they
share: constants, launches, the tiled GEMM, elementwise and data-movement launches.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ModelError
from ...graph import Operator, Subgraph, Tensor
from ...ops.common import dequantize
from ..switches import DEFAULTS, Switches
from . import program, squeeze_excite
from .codes import Act, Binary, Step, Unary
from .concat_views import ConcatPlan, View, plan_concat_views
from .fusions import plan_fusion
from .fusions.epilogue import MAX_STEPS
from .launch import (
    LOCAL_1D,
    Buf,
    Const,
    Counters,
    Launch,
    Lowered,
    Scratch,
    contiguous_strides,
    i4,
    round_up,
    shape4,
)
from .lowering_api import StepSpec
from .records import record_for
from .records.conv import patch_runs
from .schedule import launch_order

#: TFLite fused activation -> the `unary` op applying it (ops whose kernel does not fuse it).
ACT_TO_UNARY = {
    Act.RELU: Unary.RELU,
    Act.RELU6: Unary.RELU6,
    Act.RELU_N1_TO_1: Unary.RELU_N1_TO_1,
    Act.SIGMOID: Unary.LOGISTIC,
    Act.TANH: Unary.TANH,
}
#: The GEMMs' work split (gemm_plan) follows the switches' rules (gpu/switches.py).


def gemm_plan(
    m: int,
    n: int,
    k: int,
    compute_units: int,
    computed_a: bool = False,
    depthwise: bool = False,
    groups_per_cu: int | None = None,
    switches: Switches = DEFAULTS,
) -> tuple[str, int, int]:
    """The GEMM variant (a GEMM_VARIANTS key), the number of K slices and K per slice for
    an [m, k] x [k, n] product: the larger tile where it fills the device, else the
    smaller, and K split where even that leaves compute units idle and K is long (or A
    is `computed_a`, dearer to load). A computed from a `depthwise` window takes the
    16-wide tile where the 32-wide one leaves compute units idle
    (`depthwise_small_tile_groups_per_cu`). `groups_per_cu`: work groups wanted in flight
    per compute unit (the switches' `gemm_groups_per_cu` unless given)."""
    target = (groups_per_cu or switches.gemm_groups_per_cu) * compute_units
    tiles64 = -(-m // 64) * -(-n // 64)
    name = "gemm64" if tiles64 >= target else "gemm32"
    splits, kps = k_split(name, m, n, k, compute_units, computed_a, groups_per_cu, switches)
    if depthwise and name == "gemm32":
        groups = -(-m // 32) * -(-n // 32) * splits
        if groups < switches.depthwise_small_tile_groups_per_cu * compute_units:
            name = "gemm16"
            splits, kps = k_split(name, m, n, k, compute_units, computed_a, groups_per_cu, switches)
    return name, splits, kps


def k_split(
    name: str,
    m: int,
    n: int,
    k: int,
    compute_units: int,
    computed_a: bool = False,
    groups_per_cu: int | None = None,
    switches: Switches = DEFAULTS,
) -> tuple[int, int]:
    """The number of K slices and K per slice of an [m, k] x [k, n] product on the tile of
    GEMM variant `name`: K split where the tiles leave compute units idle and K is long
    (or A is `computed_a`, dearer to load); `groups_per_cu` and `switches` as
    gemm_plan's."""
    target = (groups_per_cu or switches.gemm_groups_per_cu) * compute_units
    ts, _, tk = program.GEMM_VARIANTS[name]
    tiles = -(-m // ts) * -(-n // ts)
    splits, steps = 1, -(-k // tk)
    least_k = switches.min_computed_split_k
    if tiles < target and computed_a and k >= 2 * least_k:
        splits = min(-(-target // tiles), k // least_k)
    elif tiles < target and not computed_a and steps >= switches.min_split_steps:
        splits = min(-(-target // tiles), steps // switches.min_steps_per_split)
    kps = -(-k // splits)
    kps = -(-kps // tk) * tk  # K per split, a multiple of the k step
    return -(-k // kps), kps


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
        act = op.options.get("fused_activation_function", 0)
        if act:
            n = self.t(out).size
            code = np.int32(ACT_TO_UNARY[Act(act)])
            self.emit_1d(op, "unary", [Buf(out), Buf(out), np.int32(n), code, np.float32(0)], n)

    def qdq(self, op: Operator, out: int) -> None:
        """Quantize-and-dequantize after a tensor with quantization parameters."""
        t = self.t(out)
        q = t.quantization
        if q is None or t.dtype.kind not in "iu" or q.per_channel:
            return
        if self.view(out) is not None:  # a contiguous launch would snap the wrong values
            raise ValueError(f"tensor {out} lives in a concatenation; its kernel must snap it")
        info = np.iinfo(t.dtype)
        scale, zp = float(q.scale[0]), int(q.zero_point[0])
        lo, hi = scale * (info.min - zp), scale * (info.max - zp)
        self.emit_1d(
            op,
            "qdq",
            [Buf(out), np.int32(t.size), np.float32(lo), np.float32(hi), np.float32(scale)],
            t.size,
        )

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
        chains = plan_fusion(self.sg, nodes, leaving)
        fused = {n: chain.nodes for n, chain in chains.items()}
        absorbed = {m for members in fused.values() for m in members}
        # a GEMM scaling its input as it loads it (a gate, a BatchNorm) reads it with a row
        # stride: the MUL it absorbed may read a view
        gemm_muls = {c.before[0] for c in chains.values() if c.input_affine or c.input_scale}
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
            self.steps, self.input_scale = chain.steps, chain.input_scale
            self.input_pad, self.input_depthwise = chain.input_pad, chain.input_depthwise
            self.input_mean, self.input_affine = chain.input_mean, chain.input_affine
            self.clamped = chain.clamped
            try:
                if chain.then:
                    squeeze_excite.lower(self, op, chain)
                else:
                    self._record(op).lower(self, op)
            finally:
                self.steps, self.input_scale = [], None
                self.input_pad, self.input_depthwise, self.input_mean = None, None, None
                self.input_affine, self.clamped = None, {}
            for launch in self.out.launches[first:]:
                launch.covers = (n, *chain.nodes, *chain.clamps)

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
        code = Unary(code)  # an unknown code fails here, not in the kernel
        n = self.t(op.outputs[0]).size
        args = [Buf(op.inputs[0]), Buf(op.outputs[0]), np.int32(n), np.int32(code)]
        self.emit_1d(op, "unary", [*args, np.float32(param)], n)

    def broadcast_strides(self, i: int, out_shape: tuple[int, ...]) -> np.ndarray:
        """The int4 strides reading tensor `i` broadcast to the 4-D `out_shape` (0 on
        broadcast dimensions)."""
        s = shape4(self.t(i).shape)
        view = self.view(i)
        if view is not None:  # a prefix of a concatenation's pixels (offset 0)
            return i4(view.strides4(s))
        raw = self.t(i).shape
        if (
            len(raw) == 2
            and raw == (out_shape[0], out_shape[3])
            and raw[0] not in (1, out_shape[2])
        ):
            s = (raw[0], 1, 1, raw[1])  # [b, c] against [b, x, y, c]: the delegate's BHWC view
        cs = contiguous_strides(s)
        return i4([0 if s[k] == 1 and out_shape[k] != 1 else cs[k] for k in range(4)])

    def binary(self, op: Operator, code: Binary) -> None:
        code = Binary(code)  # an unknown code fails here, not in the kernel
        out_shape = shape4(self.t(op.outputs[0]).shape)

        def strides(i: int) -> np.ndarray:
            return self.broadcast_strides(i, out_shape)

        a, b = op.inputs[0], op.inputs[1]
        n = int(np.prod(out_shape))
        act = op.options.get("fused_activation_function", 0)
        self.emit_1d(
            op,
            "binary4d",
            [
                self.operand(a),
                self.operand(b),
                Buf(op.outputs[0]),
                i4(out_shape),
                strides(a),
                strides(b),
                np.int32(code),
                self.oview(Buf(op.outputs[0]), out_shape[3]),
                *self.epilogue(act),
            ],
            n,
        )

    def gemm(
        self,
        op: Operator,
        a: Any,
        b: Any,
        bias: Any,
        out: Any,
        m: int,
        n: int,
        k: int,
        act: int,
        a_scale: Any = None,
        a_snap: tuple[float, float, float, float] | None = None,
        a_depthwise: list[Any] | None = None,
        a_patch: np.ndarray | None = None,
        a_mean: np.ndarray | None = None,
        a_affine: tuple[Any, float, float] | None = None,
    ) -> None:
        """Tiled GEMM; small outputs split K across work groups to fill the device.
        `a_scale`: a K-vector multiplying A's columns as they are loaded; `a_snap`: the QDQ
        step's (lo, hi, scale, 0) that snaps each product to an int8 grid after it;
        `a_depthwise`: A is the output of a depthwise convolution whose input is `a`,
        computed as it is loaded (records/depthwise.py's `prologue_args` after the input);
        `a_patch`: A's rows are a convolution's patches of `a`, at this int16 geometry
        (records/conv.py: patch_geometry); `a_mean`: A is the mean of `a` over its
        (pixels, channels) = a_mean (gemm.cl.in's mgeo); `a_affine`: (a 2K-vector of
        scales then shifts, low, high): A is read as clamp(a * scale + shift, low, high).
        A plain `a` living in a concatenation's output is read with its row stride."""
        computed_a = a_depthwise is not None or a_mean is not None
        depthwise = a_depthwise is not None
        name, splits, kps = gemm_plan(
            m,
            n,
            k,
            self.compute_units,
            computed_a,
            depthwise,
            self.gemm_groups_per_cu,
            self.switches,
        )
        ts, wpt, _ = program.GEMM_VARIANTS[name]
        rts = ts // wpt
        gsize = (-(-n // ts) * rts, -(-m // ts) * rts, splits)
        scratch = Scratch(4 * splits * m * n if splits > 1 else 4)
        counters = Counters(gsize[0] // rts * (gsize[1] // rts))
        scale = (
            a_scale
            if a_scale is not None
            else self.add_const("epilogue_none", np.zeros(1, np.float32))
        )
        scaled = 0 if a_scale is None else 2 if a_snap is not None else 1
        snap = np.array(a_snap or (0.0, 0.0, 1.0, 0.0), np.float32)
        if a_affine is not None:
            if a_scale is not None:
                raise ValueError("a GEMM scales its input or applies an affine map, not both")
            scale, (low, high) = a_affine[0], a_affine[1:]
            scaled, snap = 3, np.array([low, high, 1.0, 0.0], np.float32)
        plain = a_depthwise is None and a_patch is None and a_mean is None
        view = self.view(a.tensor) if plain and isinstance(a, Buf) else None
        lda = view.stride if view is not None else k
        if a_depthwise is not None:
            if a_scale is not None:
                raise ValueError("a GEMM computes a depthwise input or scales it, not both")
            name += program.DEPTHWISE_SUFFIX
            args = [a, b, bias, out, scratch, counters, *a_depthwise]
        else:
            args = [a, b, bias, out, scratch, counters, scale, np.int32(scaled), snap]
            if a_scale is not None and (a_patch is not None or a_mean is not None):
                raise ValueError("a GEMM scales its input or reads it another way, not both")
            if a_patch is not None:
                name += program.PATCH_SUFFIX
                args.append(a_patch)
            elif a_mean is not None:
                name += program.MEAN_SUFFIX
                args.append(a_mean)
        ldc, coff = self.store_view(out) or (n, 0)
        args += list(map(np.int32, (m, n, k, kps, lda, ldc, coff)))
        args += self.epilogue(act)
        # four at a time where no load crosses a row of A, nor for patches a contiguous run
        runs = (k, lda) if a_patch is None else (k, *patch_runs(a_patch))
        if n % 4 == 0 and all(r % 4 == 0 for r in runs):
            name += program.VECTOR_SUFFIX
        self.emit(op, name, args, gsize, (rts, rts, 1))
