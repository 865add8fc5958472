"""Which ops the GPU delegate takes: TFLite's GPU support rules, as data.

`supports(op, subgraph, options)` answers (ok, why) the way the real delegate does, and
the reasons reach the user, the database and the dashboard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Operator, Subgraph

#: Fused activations the delegate can fuse (not SIGN_BIT).
FUSABLE_ACTIVATIONS = {0, 1, 2, 3, 4, 6}  # NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGMOID

NOT_SUPPORTED = "Operation is not supported."
TYPE_SHAPE = "OP is supported, but tensor type/shape isn't compatible."


@dataclass(frozen=True)
class OpRule:
    """Versions accepted in float models, and with quantization enabled."""

    float_versions: tuple[int, ...]
    quant_versions: tuple[int, ...] = ()


def _v(n: int) -> tuple[int, ...]:
    return tuple(range(1, n + 1))


#: The GPU list (REFERENCE.md) with the newer delegate's versions and ops.
RULES: dict[str, OpRule] = {
    "ADD": OpRule(_v(2), _v(2)),
    "AVERAGE_POOL_2D": OpRule(_v(1), _v(2)),
    "CONCATENATION": OpRule(_v(1), _v(2)),
    "CONV_2D": OpRule(_v(1), _v(6)),
    "DEPTHWISE_CONV_2D": OpRule(_v(2), _v(6)),
    "EXP": OpRule(_v(1), _v(2)),
    "FULLY_CONNECTED": OpRule(_v(1), _v(9)),
    "LOGICAL_AND": OpRule(_v(1)),
    "LOGISTIC": OpRule(_v(1), _v(2)),
    "LSTM": OpRule((2,)),  # the basic LSTM only
    "MAX_POOL_2D": OpRule(_v(1), _v(2)),
    "MAXIMUM": OpRule(_v(1), _v(2)),
    "MINIMUM": OpRule(_v(1), _v(2)),
    "MUL": OpRule(_v(1), _v(3)),
    "PAD": OpRule(_v(1), _v(2)),
    "PRELU": OpRule(_v(1)),
    "RELU": OpRule(_v(1), _v(2)),
    "RELU6": OpRule(_v(1), _v(2)),
    "RESHAPE": OpRule(_v(1), _v(1)),
    "RESIZE_BILINEAR": OpRule(_v(3), _v(3)),
    "SOFTMAX": OpRule(_v(1), _v(2)),
    "STRIDED_SLICE": OpRule(_v(1), _v(4)),
    "SUB": OpRule(_v(1), _v(2)),
    "TRANSPOSE_CONV": OpRule(_v(1), _v(3)),
    # newer delegates
    "MEAN": OpRule(_v(1), _v(2)),
    "TRANSPOSE": OpRule(_v(1), _v(2)),
    "SLICE": OpRule(_v(1), _v(2)),
    "SPACE_TO_DEPTH": OpRule(_v(1), _v(2)),
    "DEPTH_TO_SPACE": OpRule(_v(1), _v(2)),
    "TANH": OpRule(_v(1), _v(2)),
    "HARD_SWISH": OpRule(_v(1)),
    "DIV": OpRule(_v(1)),
    "SQUARED_DIFFERENCE": OpRule(_v(1)),
    "RSQRT": OpRule(_v(1), _v(2)),
    "SQRT": OpRule(_v(1)),
    "RESIZE_NEAREST_NEIGHBOR": OpRule(_v(3), _v(3)),
    "QUANTIZE": OpRule((), _v(2)),  # only in the float view of quantized models
    "DEQUANTIZE": OpRule(_v(3), _v(3)),
}


@dataclass(frozen=True)
class SupportOptions:
    """The delegate options that change what it takes."""

    enable_quant: bool = True


def _runtime(sg: Subgraph, t: int) -> bool:
    return t >= 0 and not sg.tensors[t].is_constant


def _type_shape_ok(op: Operator, sg: Subgraph, opts: SupportOptions) -> bool:
    for t in (*op.inputs, *op.outputs):
        if t < 0:
            continue
        tensor = sg.tensors[t]
        if len(tensor.shape) > 4:
            return False
        if not _runtime(sg, t):
            continue
        if tensor.dtype in (np.float32, np.float16):
            continue
        if opts.enable_quant and tensor.dtype in (np.int8, np.uint8):
            q = tensor.quantization
            if q is None or q.per_channel:
                return False  # per-channel quantized runtime tensors are not delegated
            continue
        if op.op == "LOGICAL_AND" and tensor.dtype == np.bool_:
            continue
        return False
    return True


def _is_quantized_op(op: Operator, sg: Subgraph) -> bool:
    return any(
        t >= 0 and sg.tensors[t].dtype in (np.int8, np.uint8) and _runtime(sg, t)
        for t in (*op.inputs, *op.outputs)
    )


def _shape(sg: Subgraph, t: int) -> list[int]:
    return list(sg.tensors[t].shape)


def _check_binary_broadcast(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    a, b = op.inputs[0], op.inputs[1]
    sa, sb = _shape(sg, a), _shape(sg, b)
    if sa == sb or sg.tensors[b].is_constant or sg.tensors[a].is_constant:
        return True, ""
    big, small = (sa, sb) if len(sa) >= len(sb) else (sb, sa)
    ok = (
        (len(big) == 4 and len(small) == 3 and big[0] == 1 and big[1:] == small)
        or (len(big) == 4 and small in ([1, 1], [1]))
        or (len(big) == 4 and len(small) == 2 and small == [big[0], big[3]])
        or (len(big) == len(small) and all(s in (1, d) for s, d in zip(small, big)))
    )
    if ok:
        return True, ""
    return False, f"Doesn't support broadcasting - input0: {sa}, input1: {sb}"


def _check_op(op: Operator, sg: Subgraph) -> tuple[bool, str]:
    act = op.options.get("fused_activation_function", 0)
    if act not in FUSABLE_ACTIVATIONS:
        return False, "Unsupported fused activation: SIGN_BIT."
    name = op.op
    if name == "CONV_2D":
        runtime_inputs = sum(_runtime(sg, t) for t in op.inputs)
        if runtime_inputs not in (1, 2):
            return False, f"Expected 1 or 2 runtime inputs, got {runtime_inputs}."
        for key in ("stride_w", "stride_h", "dilation_w_factor", "dilation_h_factor"):
            if op.options.get(key, 1) <= 0:
                return False, f"Incorrect {key}: {op.options.get(key)}."
        if not sg.tensors[op.inputs[1]].is_constant:
            return False, "Weights must be constant."
    elif name == "DEPTHWISE_CONV_2D":
        inp, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
        mult = op.options.get("depth_multiplier", 1) or 1
        out_c = sg.tensors[op.outputs[0]].shape[-1]
        if out_c != inp.shape[-1] * mult:
            return False, "Output channels must equal input channels times depth multiplier."
        if len(op.inputs) > 2 and op.inputs[2] >= 0 and sg.tensors[op.inputs[2]].size != out_c:
            return False, "Bias size must equal the number of output channels."
        if not w.is_constant:
            return False, "Weights must be constant."
    elif name == "FULLY_CONNECTED":
        if op.options.get("weights_format", 0) != 0:
            return False, "Unsupported FullyConnected weights format."
        if sg.tensors[op.inputs[0]].is_constant:
            return False, "FullyConnected doesn't support constant input."
        if not sg.tensors[op.inputs[1]].is_constant:
            return False, "Weights must be constant."
        if op.options.get("keep_num_dims") and len(_shape(sg, op.inputs[0])) != len(
            _shape(sg, op.outputs[0])
        ):
            return False, "Input and output ranks must be equal with keep_num_dims."
    elif name in ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "DIV", "SQUARED_DIFFERENCE"):
        if len(op.inputs) != 2:
            return False, f"Expected 2 inputs, got {len(op.inputs)}."
        return _check_binary_broadcast(op, sg)
    elif name == "SOFTMAX":
        if abs(op.options.get("beta", 1.0) - 1.0) > 1e-6:
            return False, "Softmax.beta != 1 is not supported."
    elif name in ("RESHAPE", "STRIDED_SLICE", "SLICE", "PAD", "TRANSPOSE", "MEAN"):
        for t in op.inputs[1:]:
            if t >= 0 and not sg.tensors[t].is_constant:
                return False, "Shape-like inputs must be constant."
        if name == "STRIDED_SLICE" and (
            op.options.get("ellipsis_mask") or op.options.get("new_axis_mask")
        ):
            return False, "Ellipsis and new_axis masks are not supported."
        if name == "MEAN":
            rank = len(_shape(sg, op.inputs[0]))
            axes = np.atleast_1d(sg.tensors[op.inputs[1]].data)
            norm = sorted({int(a) % max(rank, 1) for a in axes})
            if not norm or norm != list(range(norm[0], norm[-1] + 1)):
                return False, f"MEAN over non-adjacent axes {norm} is not supported."
    elif name == "LSTM" and (op.options.get("kernel_type", 0) != 1 or len(op.inputs) != 5):
        return False, "Only the basic LSTM kernel is supported."
    elif name == "TRANSPOSE_CONV" and not all(sg.tensors[t].is_constant for t in op.inputs[:2]):
        return False, "Output shape and weights must be constant."
    return True, ""


def supports(
    op: Operator, sg: Subgraph, opts: SupportOptions = SupportOptions()
) -> tuple[bool, str]:
    """Whether the GPU delegate takes `op`, and if not, why (TFLite's wording)."""
    rule = RULES.get(op.op)
    if rule is None:
        return False, NOT_SUPPORTED
    quantized = _is_quantized_op(op, sg)
    if quantized and not opts.enable_quant:
        return False, TYPE_SHAPE
    versions = rule.quant_versions if opts.enable_quant else rule.float_versions
    if op.version not in versions and op.version not in rule.float_versions:
        known = versions or rule.float_versions
        if not known:  # e.g. QUANTIZE with quantization disabled
            return False, TYPE_SHAPE
        return (
            False,
            f"Max version supported: {max(known)}. Requested version {op.version}.",
        )
    if not _type_shape_ok(op, sg, opts):
        return False, TYPE_SHAPE
    return _check_op(op, sg)
