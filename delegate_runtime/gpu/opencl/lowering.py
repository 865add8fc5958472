"""Lower delegated nodes to OpenCL launches (the float view of the partition).

Every runtime tensor of a partition is float (fp32 or fp16 storage). Quantized models run
as TFLite's delegate runs them: constants dequantized here, once; after every tensor with
quantization parameters a quantize-and-dequantize launch snaps values to its grid.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import ModelError
from ...graph import Operator, Subgraph, Tensor
from ...ops.common import dequantize, padding_amounts
from ...ops.registry import OpContext, lookup
from . import program

#: Fused activation code -> `unary` op code.
ACT_TO_UNARY = {1: 0, 3: 1, 2: 2, 6: 3, 4: 4}
UNARY_OPS = {
    "RELU": 0,
    "RELU6": 1,
    "LOGISTIC": 3,
    "TANH": 4,
    "EXP": 5,
    "HARD_SWISH": 6,
    "RSQRT": 7,
    "SQRT": 8,
}
BINARY_OPS = {
    "ADD": 0,
    "SUB": 1,
    "MUL": 2,
    "DIV": 3,
    "MAXIMUM": 4,
    "MINIMUM": 5,
    "SQUARED_DIFFERENCE": 6,
    "PRELU": 7,
    "LOGICAL_AND": 8,
}
INDEX_MAP_OPS = ("TRANSPOSE", "STRIDED_SLICE", "SLICE", "SPACE_TO_DEPTH", "DEPTH_TO_SPACE", "PAD")
#: Work-group size of 1-D kernels.
LOCAL_1D = 128
#: Smallest slice of K worth a work group of its own in split-K GEMM.
MIN_SPLIT_K = 32
#: Work groups per compute unit a GEMM aims for before it splits K.
GEMM_GROUPS_PER_CU = 4


@dataclass(frozen=True)
class Buf:
    """A runtime tensor's buffer (resolved through aliases by the memory plan)."""

    tensor: int


@dataclass(frozen=True)
class Const:
    """A constant buffer prepared at lowering time."""

    key: str


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


@dataclass
class Launch:
    kernel: str
    args: list[Any]
    gsize: tuple[int, ...]
    lsize: tuple[int, ...] | None
    node: int


@dataclass
class Lowered:
    launches: list[Launch] = field(default_factory=list)
    consts: dict[str, np.ndarray] = field(default_factory=dict)  #: float32 or int32 arrays
    alias: dict[int, int] = field(default_factory=dict)  #: tensor -> tensor sharing its buffer


def shape4(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    if len(shape) > 4:
        raise ModelError(f"rank {len(shape)} is not supported on the GPU")
    return tuple([1] * (4 - len(shape)) + list(shape))  # type: ignore[return-value]


def i4(values: tuple[int, ...] | list[int]) -> np.ndarray:
    return np.array(list(values), dtype=np.int32)


def _round_up(n: int, m: int) -> int:
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
    return (_round_up(d0, lx), _round_up(d1, ly), d2), (lx, ly, 1)


def contiguous_strides(shape: tuple[int, ...]) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return strides[::-1]


class Lowerer:
    """Turns the nodes of one partition into launches."""

    def __init__(self, sg: Subgraph, compute_units: int, precision: str = "fp32"):
        self.sg = sg
        self.compute_units = compute_units
        self.precision = precision
        self.out = Lowered()

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
        self.emit(op, kernel, args, (_round_up(max(n, 1), LOCAL_1D),), (LOCAL_1D,))

    def activation(self, op: Operator, out: int) -> None:
        """A separate activation launch, for ops whose kernel does not fuse it."""
        act = op.options.get("fused_activation_function", 0)
        if act:
            n = self.t(out).size
            self.emit_1d(
                op, "unary", [Buf(out), Buf(out), np.int32(n), np.int32(ACT_TO_UNARY[act])], n
            )

    def qdq(self, op: Operator, out: int) -> None:
        """Quantize-and-dequantize after a tensor with quantization parameters."""
        t = self.t(out)
        q = t.quantization
        if q is None or t.dtype.kind not in "iu" or q.per_channel:
            return
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
        name = op.op
        if name in UNARY_OPS:
            self.unary(op, UNARY_OPS[name])
        elif name in BINARY_OPS:
            self.binary(op, BINARY_OPS[name])
        elif name in INDEX_MAP_OPS:
            self.index_map(op)
        else:
            method = getattr(self, "op_" + name.lower(), None)
            if method is None:
                raise ModelError(f"{op.describe()} has no GPU kernel")
            method(op)
        for out in op.outputs:
            self.qdq(op, out)

    def op_reshape(self, op: Operator) -> None:
        self.out.alias[op.outputs[0]] = op.inputs[0]

    def op_dequantize(self, op: Operator) -> None:
        self.out.alias[op.outputs[0]] = op.inputs[0]  # the float view is already dequantized

    def op_quantize(self, op: Operator) -> None:
        self.unary(op, 9)  # a copy; lower() then snaps it to the output's grid

    def unary(self, op: Operator, code: int) -> None:
        n = self.t(op.outputs[0]).size
        self.emit_1d(
            op, "unary", [Buf(op.inputs[0]), Buf(op.outputs[0]), np.int32(n), np.int32(code)], n
        )

    def binary(self, op: Operator, code: int) -> None:
        out_shape = shape4(self.t(op.outputs[0]).shape)

        def strides(i: int) -> np.ndarray:
            s = shape4(self.t(i).shape)
            raw = self.t(i).shape
            if (
                len(raw) == 2
                and raw == (out_shape[0], out_shape[3])
                and raw[0] not in (1, out_shape[2])
            ):
                s = (raw[0], 1, 1, raw[1])  # [b, c] against [b, x, y, c]: the delegate's BHWC view
            cs = contiguous_strides(s)
            return i4([0 if s[k] == 1 and out_shape[k] != 1 else cs[k] for k in range(4)])

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
                np.int32(act),
            ],
            n,
        )

    def op_conv_2d(self, op: Operator) -> None:
        x, w_i, out = op.inputs[0], op.inputs[1], op.outputs[0]
        w = self.const_float(w_i)  # OHWI
        oc, kh, kw, ic = w.shape
        in_s, out_s = shape4(self.t(x).shape), shape4(self.t(out).shape)
        o = op.options
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
        act = o.get("fused_activation_function", 0)
        bias = self.bias(op, 2, oc)
        if kh == kw == 1 and sh == sw == 1 and in_s[1:3] == out_s[1:3]:
            weights = self.add_const(f"t{w_i}:kn", w.reshape(oc, ic).T)
            self.gemm(op, Buf(x), weights, bias, Buf(out), in_s[0] * in_s[1] * in_s[2], oc, ic, act)
            return
        pt, _ = padding_amounts(in_s[1], kh, sh, dh, o.get("padding", 0))
        pl, _ = padding_amounts(in_s[2], kw, sw, dw, o.get("padding", 0))
        g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
        self.emit(
            op,
            "conv2d_direct",
            [
                Buf(x),
                self.add_const(f"t{w_i}:hwio", w.transpose(1, 2, 3, 0)),
                bias,
                Buf(out),
                i4(in_s),
                i4(out_s),
                *map(np.int32, (kh, kw, sh, sw, dh, dw, pt, pl, act)),
            ],
            g,
            lsz,
        )

    def gemm(
        self, op: Operator, a: Any, b: Any, bias: Any, out: Any, m: int, n: int, k: int, act: int
    ) -> None:
        """Tiled GEMM; small outputs split K across work groups to fill the device."""
        target = GEMM_GROUPS_PER_CU * self.compute_units  # work groups wanted in flight
        tiles64 = -(-m // 64) * -(-n // 64)
        name = "gemm64" if tiles64 >= target else "gemm32"
        ts, wpt, _ = program.GEMM_VARIANTS[name]
        tiles = -(-m // ts) * -(-n // ts)
        splits = 1
        if tiles < target and k >= 2 * MIN_SPLIT_K:
            splits = min(-(-target // tiles), k // MIN_SPLIT_K)
        kps = -(-k // splits)
        tk = program.GEMM_VARIANTS[name][2]
        kps = -(-kps // tk) * tk  # K per split, a multiple of the k step
        splits = -(-k // kps)
        rts = ts // wpt
        gsize = (-(-n // ts) * rts, -(-m // ts) * rts, splits)
        scratch = Scratch(4 * splits * m * n if splits > 1 else 4)
        counters = Counters(gsize[0] // rts * (gsize[1] // rts))
        args = [a, b, bias, out, scratch, counters, *map(np.int32, (m, n, k, kps, act))]
        if k % 4 == 0 and n % 4 == 0:
            name += program.VECTOR_SUFFIX
        self.emit(op, name, args, gsize, (rts, rts, 1))

    def op_fully_connected(self, op: Operator) -> None:
        x, w_i, out = op.inputs[0], op.inputs[1], op.outputs[0]
        w = self.const_float(w_i)
        n, k = w.shape
        m = self.t(x).size // k
        weights = self.add_const(f"t{w_i}:kn", w.T)
        act = op.options.get("fused_activation_function", 0)
        self.gemm(op, Buf(x), weights, self.bias(op, 2, n), Buf(out), m, n, k, act)

    def op_depthwise_conv_2d(self, op: Operator) -> None:
        x, w_i, out = op.inputs[0], op.inputs[1], op.outputs[0]
        w = self.const_float(w_i)  # [1, KH, KW, OC]
        _, kh, kw, oc = w.shape
        in_s, out_s = shape4(self.t(x).shape), shape4(self.t(out).shape)
        o = op.options
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
        mult = oc // in_s[3]
        act = o.get("fused_activation_function", 0)
        pt, _ = padding_amounts(in_s[1], kh, sh, dh, o.get("padding", 0))
        pl, _ = padding_amounts(in_s[2], kw, sw, dw, o.get("padding", 0))
        wc, bias = self.add_const(f"t{w_i}", w), self.bias(op, 2, oc)
        # NOTE: chosen per precision by `bench/diag_gpu.py --only depthwise` on the H200:
        # with half storage a compile-time x stride is faster; with float, a runtime one
        if kh == kw == 3 and (dh, dw, mult) == (1, 1, 1) and oc % 4 == 0:
            if self.precision == "fp16" and sw in (1, 2):
                name, scalars = f"depthwise3x3_s{sw}x1", (sh, pt, pl, act)
            else:
                name, scalars = "depthwise3x3_c4", (sh, sw, pt, pl, act)
            g, lsz = grid3(oc // 4, out_s[2], out_s[0] * out_s[1])
            args = [Buf(x), wc, bias, Buf(out), i4(in_s), i4(out_s), *map(np.int32, scalars)]
            self.emit(op, name, args, g, lsz)
            return
        g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
        self.emit(
            op,
            "depthwise_conv2d",
            [
                Buf(x),
                wc,
                bias,
                Buf(out),
                i4(in_s),
                i4(out_s),
                *map(np.int32, (kh, kw, sh, sw, dh, dw, pt, pl, mult, act)),
            ],
            g,
            lsz,
        )

    def op_transpose_conv(self, op: Operator) -> None:
        w_i, x, out = op.inputs[1], op.inputs[2], op.outputs[0]
        w = self.const_float(w_i)  # [OC, KH, KW, IC]
        oc, kh, kw, _ = w.shape
        in_s, out_s = shape4(self.t(x).shape), shape4(self.t(out).shape)
        o = op.options
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        pt = pl = 0
        if o.get("padding", 0) == 0:  # SAME, computed from the output back to the input
            pt = max((in_s[1] - 1) * sh + kh - out_s[1], 0) // 2
            pl = max((in_s[2] - 1) * sw + kw - out_s[2], 0) // 2
        g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
        act = o.get("fused_activation_function", 0)
        self.emit(
            op,
            "transpose_conv2d",
            [
                Buf(x),
                self.add_const(f"t{w_i}", w),
                self.bias(op, 3, oc),
                Buf(out),
                i4(in_s),
                i4(out_s),
                *map(np.int32, (kh, kw, sh, sw, pt, pl, act)),
            ],
            g,
            lsz,
        )

    def op_lstm(self, op: Operator) -> None:
        """The basic LSTM (kernel_type BASIC, v2): concat [x, h], one GEMM, the gates."""
        x, h, w_i, _, c = op.inputs[:5]
        h_out, c_out, concat, activ = op.outputs
        w = self.const_float(w_i)  # [4 * units, in + units]
        units4, depth = w.shape
        batch = self.t(x).size // self.t(x).shape[-1]
        offset = 0
        for src in (x, h):
            cols = self.t(src).shape[-1]
            shape = (1, 1, batch, cols)
            self.emit_1d(
                op,
                "copy4d",
                [
                    self.operand(src),
                    Buf(concat),
                    i4(shape),
                    i4(contiguous_strides(shape)),
                    np.int32(0),
                    i4((0, 0, depth, 1)),
                    np.int32(offset),
                ],
                batch * cols,
            )
            offset += cols
        weights = self.add_const(f"t{w_i}:kn", w.T)
        self.gemm(
            op, Buf(concat), weights, self.bias(op, 3, units4), Buf(activ), batch, units4, depth, 0
        )
        n = batch * (units4 // 4)
        self.emit_1d(
            op,
            "lstm_basic_gates",
            [
                Buf(activ),
                self.operand(c),
                Buf(h_out),
                Buf(c_out),
                np.int32(batch),
                np.int32(units4 // 4),
            ],
            n,
        )

    def _pool(self, op: Operator, kind: int) -> None:
        x, out = op.inputs[0], op.outputs[0]
        in_s, out_s = shape4(self.t(x).shape), shape4(self.t(out).shape)
        o = op.options
        kh, kw = o.get("filter_height", 1), o.get("filter_width", 1)
        sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
        pt, _ = padding_amounts(in_s[1], kh, sh, 1, o.get("padding", 0))
        pl, _ = padding_amounts(in_s[2], kw, sw, 1, o.get("padding", 0))
        g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
        act = o.get("fused_activation_function", 0)
        self.emit(
            op,
            "pool2d",
            [
                Buf(x),
                Buf(out),
                i4(in_s),
                i4(out_s),
                *map(np.int32, (kh, kw, sh, sw, pt, pl, kind, act)),
            ],
            g,
            lsz,
        )

    def op_average_pool_2d(self, op: Operator) -> None:
        self._pool(op, 0)

    def op_max_pool_2d(self, op: Operator) -> None:
        self._pool(op, 1)

    def op_mean(self, op: Operator) -> None:
        x, out = op.inputs[0], op.outputs[0]
        shape = self.t(x).shape
        axes = sorted({int(a) % len(shape) for a in np.atleast_1d(self.t(op.inputs[1]).data)})
        if axes != list(range(axes[0], axes[-1] + 1)):
            raise ModelError(f"{op.describe()}: MEAN over non-adjacent axes {axes} on the GPU")
        outer = int(np.prod(shape[: axes[0]], dtype=np.int64))
        inner = int(np.prod([shape[a] for a in axes], dtype=np.int64))
        rest = int(np.prod(shape[axes[-1] + 1 :], dtype=np.int64))
        g, lsz = grid3(rest, outer, 1)
        self.emit(
            op,
            "mean_axis",
            [Buf(x), Buf(out), np.int32(outer), np.int32(inner), np.int32(rest)],
            g[:2],
            lsz[:2],
        )

    def op_softmax(self, op: Operator) -> None:
        x, out = op.inputs[0], op.outputs[0]
        cols = self.t(x).shape[-1]
        rows = self.t(x).size // cols
        ls = 128
        self.emit(
            op,
            "softmax_rows",
            [Buf(x), Buf(out), np.int32(cols), Local(4 * ls)],
            (rows * ls,),
            (ls,),
        )

    def op_concatenation(self, op: Operator) -> None:
        out = op.outputs[0]
        out_shape = self.t(out).shape
        axis = op.options.get("axis", 0) % len(out_shape) + (4 - len(out_shape))
        out4 = shape4(out_shape)
        ostr = contiguous_strides(out4)
        offset = 0
        for i in op.inputs:
            s4 = shape4(self.t(i).shape)
            n = int(np.prod(s4))
            self.emit_1d(
                op,
                "copy4d",
                [
                    self.operand(i),
                    Buf(out),
                    i4(s4),
                    i4(contiguous_strides(s4)),
                    np.int32(0),
                    i4(ostr),
                    np.int32(offset * ostr[axis]),
                ],
                n,
            )
            offset += s4[axis]
        self.activation(op, out)

    def _resize(self, op: Operator, kernel: str) -> None:
        x, out = op.inputs[0], op.outputs[0]
        in_s, out_s = shape4(self.t(x).shape), shape4(self.t(out).shape)
        align = bool(op.options.get("align_corners", False))
        half = bool(op.options.get("half_pixel_centers", False))

        def scale(i: int, o: int) -> float:
            return (i - 1) / (o - 1) if align and o > 1 else i / o

        g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
        self.emit(
            op,
            kernel,
            [
                Buf(x),
                Buf(out),
                i4(in_s),
                i4(out_s),
                np.float32(scale(in_s[1], out_s[1])),
                np.float32(scale(in_s[2], out_s[2])),
                np.int32(int(align) | (int(half) << 1)),
            ],
            g,
            lsz,
        )

    def op_resize_bilinear(self, op: Operator) -> None:
        self._resize(op, "resize_bilinear")

    def op_resize_nearest_neighbor(self, op: Operator) -> None:
        self._resize(op, "resize_nearest")

    def index_map(self, op: Operator) -> None:
        """Data movement through the reference kernel run on element indices: a 4-D
        strided copy when the map is affine, else a gather by a constant index buffer."""
        x, out = op.inputs[0], op.outputs[0]
        idx = self._reference_on_indices(op)
        n = idx.size
        affine = _affine4(idx)
        if affine is not None:
            offset, strides, shape = affine
            self.emit_1d(
                op,
                "copy4d",
                [
                    Buf(x),
                    Buf(out),
                    i4(shape),
                    i4(strides),
                    np.int32(offset),
                    i4(contiguous_strides(shape)),
                    np.int32(0),
                ],
                n,
            )
        else:
            key = f"idx{op.index}"
            self.out.consts[key] = np.ascontiguousarray(idx.reshape(-1).astype(np.int32))
            self.emit_1d(op, "gather_index", [Buf(x), Buf(out), Const(key), np.int32(n)], n)

    def _reference_on_indices(self, op: Operator) -> np.ndarray:
        x = op.inputs[0]
        shape = self.t(x).shape
        ids = np.arange(1, int(np.prod(shape, dtype=np.int64)) + 1, dtype=np.int32).reshape(shape)
        kernel, why = lookup(op.op, op.version)
        if kernel is None:
            raise ModelError(f"{op.describe()}: {why}")
        fake = copy.copy(self.t(x))
        fake.dtype, fake.quantization, fake.data = np.dtype(np.int32), None, None
        ins = [ids] + [self.t(i).data if i >= 0 else None for i in op.inputs[1:]]
        tensors = [fake] + [self.t(i) if i >= 0 else None for i in op.inputs[1:]]
        outs = [copy.copy(self.t(o)) for o in op.outputs]
        for o in outs:
            o.dtype, o.quantization = np.dtype(np.int32), None
        ctx = OpContext(
            op=op, inputs=ins, in_tensors=tensors, out_tensors=outs, run_subgraph=lambda *_: []
        )
        result = kernel.fn(ctx)
        result = result if isinstance(result, np.ndarray) else result[0]
        return np.asarray(result, np.int64) - 1  # padding (0) becomes -1


def _affine4(idx: np.ndarray) -> tuple[int, list[int], tuple[int, int, int, int]] | None:
    """(offset, strides, shape) when idx[d] == offset + d . strides over a 4-D view."""
    if idx.ndim > 4 or idx.size == 0 or idx.min() < 0:
        return None
    v = idx.reshape(shape4(idx.shape))
    offset = int(v[0, 0, 0, 0])
    strides = []
    for k in range(4):
        if v.shape[k] > 1:
            step = [0, 0, 0, 0]
            step[k] = 1
            strides.append(int(v[tuple(step)]) - offset)
        else:
            strides.append(0)
    grids = np.indices(v.shape, dtype=np.int64)
    expect = offset + sum(grids[k] * strides[k] for k in range(4))
    if not np.array_equal(expect, v):
        return None
    return offset, strides, v.shape
