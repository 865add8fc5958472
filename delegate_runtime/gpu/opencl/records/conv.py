"""CONV_2D as a tiled GEMM: over the pixels for a 1x1 stride-1 convolution, over the output
pixels' windows read in place (the patch GEMM) for the others, where as_patch_gemm says so;
else a direct convolution."""

from __future__ import annotations

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.common import padding_amounts
from ...switches import DEFAULTS, Switches
from ..launch import Buf, Const, grid3, i4, shape4
from ..lowering_api import ReadA
from .depthwise import prologue_args as depthwise_prologue
from .gemm_kernel import GEMM
from .geometry import Shape, rank4, window_hw
from .lacks import NOT_MEASURED, NOT_PER_ELEMENT, NOT_SPECIALIZED
from .mean import prologue_args as mean_prologue
from .record import GpuOp, OpRule, Template, register, versions


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    runtime_inputs = sum(t >= 0 and not sg.tensors[t].is_constant for t in op.inputs)
    if runtime_inputs not in (1, 2):
        return False, f"Expected 1 or 2 runtime inputs, got {runtime_inputs}."
    for key in ("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor"):
        if op.options.get(key, 1) <= 0:
            return False, f"Incorrect {key}: {op.options.get(key)}."
    if not sg.tensors[op.inputs[1]].is_constant:
        return False, "Weights must be constant."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x, w = rank4(sg, op.inputs[0]), rank4(sg, op.inputs[1], "filter")
    if w[3] != x[3]:
        raise ModelError(f"filter {list(w)} does not fit input {list(x)}")
    return [(x[0], *window_hw(op, x[1:3], w[1:3]), w[0])]


def is_gemm(op: Operator, sg: Subgraph) -> bool:
    """A 1x1 stride-1 convolution: a GEMM over the pixels."""
    w = sg.tensors[op.inputs[1]].shape
    in_s, out_s = sg.tensors[op.inputs[0]].shape, sg.tensors[op.outputs[0]].shape
    strides = (op.options.get("stride_h", 1), op.options.get("stride_w", 1))
    return w[1:3] == (1, 1) and strides == (1, 1) and in_s[1:3] == out_s[1:3]


def windows_tile(op: Operator, sg: Subgraph) -> bool:
    """Whether the windows tile the input without overlap, padding or dilation (stride =
    window, as in a 2x2 stride-2 VALID layer, or a window as large as the input): a
    window's rows are then runs of kw * C values next to each other in the input."""
    o = op.options
    _, kh, kw, _ = sg.tensors[op.inputs[1]].shape
    _, h, w, _ = shape4(sg.tensors[op.inputs[0]].shape)
    _, oh, ow, _ = shape4(sg.tensors[op.outputs[0]].shape)
    if (o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)) != (1, 1):
        return False
    whole = (kh, kw) == (h, w) and (oh, ow) == (1, 1)
    sh, sw, padding = o.get("stride_h", 1), o.get("stride_w", 1), o.get("padding", 0)
    if not (whole or (sh, sw) == (kh, kw)):
        return False
    if padding_amounts(h, kh, sh, 1, padding)[0] or padding_amounts(w, kw, sw, 1, padding)[0]:
        return False
    return oh * kh <= h and ow * kw <= w


def as_patch_gemm(op: Operator, sg: Subgraph, switches: Switches = DEFAULTS) -> bool:
    """Whether a convolution other than a 1x1 GEMM runs as the patch GEMM (each output
    pixel's window read in place as a row of A) rather than the direct convolution: where
    its windows tile the input, or it has the switches' `patch_gemm_min_n` output channels
    or `patch_gemm_min_k` inputs per window (else the direct convolution is faster)."""
    if is_gemm(op, sg):
        return False
    n, kh, kw, c = sg.tensors[op.inputs[1]].shape
    wide = n >= switches.patch_gemm_min_n or kh * kw * c >= switches.patch_gemm_min_k
    return windows_tile(op, sg) or wide


def patch_geometry(
    in_shape: Shape, out_shape: Shape, window: tuple[int, int], strides: tuple[int, int],
    dilations: tuple[int, int], top_left: tuple[int, int], run: int,
) -> np.ndarray:  # fmt: skip
    """gemm.cl.in's pgeo for an NHWC input and output, the window (kh, kw), strides and
    dilations (h, w) and the padding before the input (top, left); `run`, stored after
    them, is how many of a row's k values lie next to each other in the input (C, or
    kw * C where the windows tile it), for the choice of four-wide loads."""
    _, h, w, c = in_shape
    _, oh, ow, _ = out_shape
    kh, kw = window
    geometry = [ow, oh, w, h, c, kw, strides[1], strides[0], dilations[1], dilations[0]]
    geometry += [top_left[1], top_left[0], run, 0, 0, 0]
    return np.array(geometry, np.int32)


def patch_runs(patch: np.ndarray) -> tuple[int, int]:
    """What of a patch row lies contiguous in the input, from patch_geometry's values: the
    `run` stored with them, and one input row (W * C). A four-wide load stays in both."""
    return int(patch[12]), int(patch[2] * patch[4])


def gemm_weights(lo, op: Operator) -> tuple[Const, Const, int]:
    """A GEMM convolution's weights as its [K, N] constant (K ordered as a window's rows,
    columns and channels; one per tensor, however many kernels read it), bias and N."""
    w = lo.const_float(op.inputs[1])  # OHWI
    oc = w.shape[0]
    return lo.add_const(f"t{op.inputs[1]}:kn", w.reshape(oc, -1).T), lo.bias(op, 2, oc), oc


def lower(lo, op: Operator) -> None:
    x, w_i, out = op.inputs[0], op.inputs[1], op.outputs[0]
    oc, kh, kw, ic = lo.t(w_i).shape  # OHWI
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    o = op.options
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
    act = o.get("fused_activation_function", 0)
    if is_gemm(op, lo.sg):
        weights, bias, _ = gemm_weights(lo, op)
        m = in_s[0] * in_s[1] * in_s[2]
        a, scale, snap, depthwise = Buf(x), None, None, None
        if lo.input_scale is not None:  # a gate MUL before it, absorbed: x * gate
            source, gate, snap = lo.input_scale
            a, scale = Buf(source), lo.operand(gate)
        if lo.input_depthwise is not None:  # the depthwise convolution before it, absorbed
            a, *depthwise = depthwise_prologue(lo, lo.sg.operators[lo.input_depthwise])
        mean, affine = None, None
        if lo.input_mean is not None:  # the MEAN over the pixels before it, absorbed
            a, mean = mean_prologue(lo, lo.sg.operators[lo.input_mean], ic)
        if lo.input_affine is not None:  # a constant MUL and ADD before it, absorbed
            source, scale_t, shift_t, low, high = lo.input_affine
            both = [lo.const_float(t).reshape(-1) for t in (scale_t, shift_t)]
            a = Buf(source)
            affine = (lo.add_const(f"t{scale_t}+t{shift_t}", np.concatenate(both)), low, high)
        elif x in lo.clamped and isinstance(a, Buf) and a.tensor == x:  # a RELU, elided
            source, low, high = lo.clamped[x]
            identity = np.concatenate([np.ones(ic, np.float32), np.zeros(ic, np.float32)])
            a, affine = Buf(source), (lo.add_const(f"identity{ic}", identity), low, high)
        read = ReadA(scale, snap, depthwise, mean=mean, affine=affine)
        lo.gemm(op, (a, weights, bias, Buf(out)), (m, oc, ic), act, read)
        return
    pt, _ = padding_amounts(in_s[1], kh, sh, dh, o.get("padding", 0))
    pl, _ = padding_amounts(in_s[2], kw, sw, dw, o.get("padding", 0))
    x, pt, pl = lo.padded_input(x, pt, pl)
    in_s = shape4(lo.t(x).shape)
    if as_patch_gemm(op, lo.sg, lo.switches):
        weights, bias, _ = gemm_weights(lo, op)
        # a window's rows lie whole in the input where it tiles it and no PAD was absorbed
        run = kw * ic if lo.input_pad is None and windows_tile(op, lo.sg) else ic
        patch = patch_geometry(in_s, out_s, (kh, kw), (sh, sw), (dh, dw), (pt, pl), run)
        m = out_s[0] * out_s[1] * out_s[2]
        lo.gemm(
            op, (Buf(x), weights, bias, Buf(out)), (m, oc, kh * kw * ic), act, ReadA(patch=patch)
        )
        return
    w, bias = lo.const_float(w_i), lo.bias(op, 2, oc)
    g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "conv2d_direct",
        [
            Buf(x),
            lo.add_const(f"t{w_i}:hwio", w.transpose(1, 2, 3, 0)),
            bias,
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (kh, kw, sh, sw, dh, dw, pt, pl)),
            *lo.epilogue(act),
        ],
        g,
        lsz,
    )


#: The direct convolution's kernels: reading storage, and reading a float32 input (a
#: partition's edge: opencl/staging_edges.py).
DIRECT = Template(
    "conv_direct.cl.in",
    lambda: {
        "conv2d_direct": {"@IN_T@": "store_t", "@LDF_IN@": "LDF"},
        "conv2d_direct_f32in": {"@IN_T@": "float", "@LDF_IN@": "LDF32"},
    },
)

register(
    GpuOp(
        "CONV_2D",
        OpRule(versions(1), versions(6)),
        lower,
        (DIRECT, "depthwise_at.cl", GEMM),
        check,
        shapes,
        epilogue=True,
        input_scale=is_gemm,
        input_pad=lambda op, sg: not is_gemm(op, sg),
        input_depthwise=is_gemm,
        input_mean=is_gemm,
        launches=("gemm*", "conv2d_direct"),
        family="convolution",
        lacks={
            "specialized": f"conv2d_direct (the windows as_patch_gemm leaves) {NOT_MEASURED}",
            "persistent": NOT_SPECIALIZED,
            "step": NOT_PER_ELEMENT,
        },
    )
)
