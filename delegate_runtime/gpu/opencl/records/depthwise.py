"""DEPTHWISE_CONV_2D: a 3x3 kernel of 4 channels per item where it fits, else the general one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops.common import padding_amounts
from ..codes import Act, From, Step
from ..launch import Buf, grid3, i4, shape4
from .geometry import Shape, rank4, window_hw
from .record import GpuOp, OpRule, StepSpec, Template, register, versions
from .steps import ACT_STEP, qdq_step


def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    inp, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
    out = sg.tensors[op.outputs[0]]
    if len(inp.shape) != 4 or len(out.shape) != 4 or len(w.shape) != 4:
        return False, "Input, weights and output must be 4-D (NHWC)."
    mult = op.options.get("depth_multiplier", 1) or 1
    out_c = out.shape[-1]
    if out_c != inp.shape[-1] * mult:
        return False, "Output channels must equal input channels times depth multiplier."
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and sg.tensors[op.inputs[2]].size != out_c:
        return False, "Bias size must equal the number of output channels."
    if not w.is_constant:
        return False, "Weights must be constant."
    return True, ""


def shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x, w = rank4(sg, op.inputs[0]), rank4(sg, op.inputs[1], "filter")
    if w[0] != 1 or x[3] <= 0 or w[3] % x[3]:
        raise ModelError(f"filter {list(w)} does not fit input {list(x)}")
    return [(x[0], *window_hw(op, x[1:3], w[1:3]), w[3])]


def as_step(op: Operator, sg: Subgraph, t: int) -> list[StepSpec] | None:
    """A 1x1 depthwise convolution (MediaPipe's per-channel scale) is a per-channel MUL
    and ADD, then its activation: steps of the kernel producing its input."""
    w = sg.tensors[op.inputs[1]]
    if op.inputs[0] != t or w.shape[:3] != (1, 1, 1) or op.options.get("depth_multiplier", 1) != 1:
        return None
    steps = [StepSpec(Step.MUL, From.CHANNEL, op.inputs[1])]
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        steps.append(StepSpec(Step.ADD, From.CHANNEL, op.inputs[2]))
    act = op.options.get("fused_activation_function", 0)
    if act:
        steps.append(StepSpec(ACT_STEP[Act(act)]))
    return steps


def _takes_3x3_kernel(kh: int, kw: int, dilation: tuple[int, int], mult: int, oc: int) -> bool:
    return kh == kw == 3 and (*dilation, mult) == (1, 1, 1) and oc % 4 == 0


def clamps_its_input(op: Operator, sg: Subgraph) -> bool:
    """Whether this node's own kernel can clamp each input value as it loads it (the
    general kernel's `iclamp`: a RELU before it, elided; the 3x3 kernels cannot)."""
    _, kh, kw, oc = sg.tensors[op.inputs[1]].shape
    dilation = (op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1))
    mult = oc // sg.tensors[op.inputs[0]].shape[-1]
    return not _takes_3x3_kernel(kh, kw, dilation, mult, oc)


def fuses_into_reader(op: Operator, sg: Subgraph) -> bool:
    """Whether a reader's kernel can compute this node's output as it loads it
    (`prologue_args`): multiplier 1 and a window wider than one pixel (a 1x1 one is a
    per-channel scale, absorbed as a step of its producer instead)."""
    w = sg.tensors[op.inputs[1]].shape
    x, out = sg.tensors[op.inputs[0]].shape, sg.tensors[op.outputs[0]].shape
    return w[1] * w[2] > 1 and x[-1] == out[-1] and len(x) == 4


@dataclass(frozen=True)
class _Window:
    """What both lowerings read off the node: the tensor read (a PAD before it absorbed),
    the weights, and the window's geometry with that PAD's rows counted in."""

    x: int
    w: np.ndarray  #: [1, KH, KW, OC] as float32
    in_s: tuple[int, int, int, int]
    out_s: tuple[int, int, int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int]  #: top, left


def _window(lo, op: Operator) -> _Window:
    x, out = op.inputs[0], op.outputs[0]
    w = lo.const_float(op.inputs[1])
    _, kh, kw, _ = w.shape
    in_s = shape4(lo.t(x).shape)
    o = op.options
    sh, sw = o.get("stride_h", 1), o.get("stride_w", 1)
    dh, dw = o.get("dilation_h_factor", 1), o.get("dilation_w_factor", 1)
    pt, _ = padding_amounts(in_s[1], kh, sh, dh, o.get("padding", 0))
    pl, _ = padding_amounts(in_s[2], kw, sw, dw, o.get("padding", 0))
    x, pt, pl = lo.padded_input(x, pt, pl)
    return _Window(
        x, w, shape4(lo.t(x).shape), shape4(lo.t(out).shape), (sh, sw), (dh, dw), (pt, pl)
    )


def window_args(lo, op: Operator) -> list:
    """What a kernel computing this node's sums itself needs (depthwise_at.cl's
    depthwise_sum): its input, weights, bias, input and output shapes and geometry."""
    win = _window(lo, op)
    _, kh, kw, oc = win.w.shape
    return [
        Buf(win.x),
        lo.add_const(f"t{op.inputs[1]}", win.w),
        lo.bias(op, 2, oc),
        i4(win.in_s),
        i4(win.out_s),
        np.array((kh, kw, *win.stride, *win.dilation, *win.pad), np.int32),
    ]


def prologue_args(lo, op: Operator) -> list:
    """The arguments with which a GEMM computes this node's output as it loads it
    (depthwise_at.cl): window_args, then the fused activation and the
    quantize-and-dequantize step of its output (or none), and the clamp of each input
    value as it is loaded (a RELU before it that fusion elided: lowering's `clamped`)."""
    snap = qdq_step(lo.sg, op.outputs[0])
    step = snap[0] if snap else StepSpec(Step.NONE)
    args = window_args(lo, op)
    low, high = -np.inf, np.inf
    clamped = lo.clamped.get(args[0].tensor)
    if clamped is not None:
        source, low, high = clamped
        args[0] = Buf(source)
    return [
        *args,
        np.int32(Act(op.options.get("fused_activation_function", 0))),
        np.array((Step(step.code), step.source), np.int32),
        np.array(step.params, np.float32),
        np.array((low, high), np.float32),
    ]


def prologue_taps(args: list) -> int:
    """The window's taps (KH * KW) of `prologue_args` without their input."""
    geometry = args[4]  # after weights, bias and the two shapes: window_args' order
    return int(geometry[0] * geometry[1])


def lower(lo, op: Operator) -> None:
    win = _window(lo, op)
    x, out, in_s, out_s = win.x, op.outputs[0], win.in_s, win.out_s
    _, kh, kw, oc = win.w.shape
    (sh, sw), (dh, dw), (pt, pl) = win.stride, win.dilation, win.pad
    mult = oc // in_s[3]
    act = op.options.get("fused_activation_function", 0)
    wc, bias = lo.add_const(f"t{op.inputs[1]}", win.w), lo.bias(op, 2, oc)
    # NOTE: chosen per precision by `bench/diag_gpu.py --only depthwise` on the H200:
    # with half storage a compile-time x stride is faster; with float, a runtime one
    if _takes_3x3_kernel(kh, kw, (dh, dw), mult, oc):
        if lo.precision == "fp16" and sw in (1, 2):
            name, scalars = f"depthwise3x3_s{sw}x1", (sh, pt, pl)
        else:
            name, scalars = "depthwise3x3_c4", (sh, sw, pt, pl)
        g, lsz = grid3(oc // 4, out_s[2], out_s[0] * out_s[1])
        args = [Buf(x), wc, bias, Buf(out), i4(in_s), i4(out_s), *map(np.int32, scalars)]
        args += lo.epilogue(act)
        lo.emit(op, name, args, g, lsz)
        return
    source, low, high = lo.clamped.get(x, (x, -np.inf, np.inf))  # an elided RELU before it
    g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "depthwise_conv2d",
        [
            Buf(source),
            wc,
            bias,
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (kh, kw, sh, sw, dh, dw, pt, pl, mult)),
            np.array((low, high), np.float32),
            *lo.epilogue(act),
        ],
        g,
        lsz,
    )


#: The 3x3 kernels of 4 channels per item and one or two columns of stride.
THREE_BY_THREE = Template(
    "depthwise3x3.cl.in",
    lambda: {f"depthwise3x3_s{sw}x1": {"@SW@": str(sw), "@XT@": "1"} for sw in (1, 2)},
)

register(
    GpuOp(
        "DEPTHWISE_CONV_2D",
        OpRule(versions(2), versions(6)),
        lower,
        ("depthwise.cl", THREE_BY_THREE),
        check,
        shapes,
        epilogue=True,
        as_step=as_step,
        input_pad=lambda op, sg: True,
        launches=("depthwise_conv2d", "depthwise3x3_*"),
        family="convolution",
    )
)
