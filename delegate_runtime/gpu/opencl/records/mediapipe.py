"""MediaPipe's six custom ops on the GPU, as TFLite's GPU delegate takes them (its parsers
in delegates/gpu/common/mediapipe/ and model_builder.cc): support rules, lowerings,
kernels in opencl/mediapipe.cl. Semantics are those of the CPU kernels (ops/mediapipe.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....errors import ModelError
from ....graph import Operator, Subgraph
from ....ops import mediapipe as mp
from ....ops import mediapipe_options as mpo
from ..launch import Buf, grid3, i4, shape4
from .geometry import Shape, rank4, shape_of
from .record import Check, GpuOp, OpRule, register, versions

KERNELS = ("mediapipe.cl",)
#: Fused activations MaxPoolingWithArgmax2D clamps with (NONE, RELU, RELU_N1_TO_1, RELU6).
CLAMPS = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}


def _runtime_inputs(op: Operator, sg: Subgraph) -> int:
    return sum(t >= 0 and not sg.tensors[t].is_constant for t in op.inputs)


def _io(
    inputs: int, runtime_inputs: int, outputs: int, parse: Callable[[Operator, Subgraph], object]
) -> Check:
    """The kernel's input count, TFLite's CheckInputsOutputs, then the op's options (a
    malformed node stays on the CPU, whose kernel reports it)."""

    def check(op: Operator, sg: Subgraph) -> tuple[bool, str]:
        if len(op.inputs) != inputs or min(op.inputs, default=0) < 0:
            return False, f"Expected {inputs} input tensor(s), but node has {len(op.inputs)}."
        got = _runtime_inputs(op, sg)
        if got != runtime_inputs:
            return False, (
                f"Expected {runtime_inputs} runtime input tensor(s), but node has {got} "
                "runtime input(s)."
            )
        if len(op.outputs) != outputs:
            return False, (
                f"Expected {outputs} output tensor(s), but node has {len(op.outputs)} output(s)."
            )
        try:
            parse(op, sg)
        except ModelError as exc:
            return False, str(exc)
        return True, ""

    return check


def _raw(op: Operator) -> bytes | None:
    return op.options.get("custom_options")


# -- Convolution2DTransposeBias ------------------------------------------------------------


def _transpose_params(op: Operator, sg: Subgraph) -> mpo.TransposeConvParams:
    if not all(sg.tensors[t].is_constant for t in op.inputs[1:3]):
        raise ModelError("Weights and bias must be constant.")
    return mpo.transpose_conv_params(mp.CONV_TRANSPOSE_BIAS, _raw(op))


def transpose_conv_bias_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    p = mpo.transpose_conv_params(mp.CONV_TRANSPOSE_BIAS, _raw(op))
    x, w = rank4(sg, op.inputs[0]), rank4(sg, op.inputs[1], "weights")
    if w[3] != x[3] or shape_of(sg, op.inputs[2])[-1:] != (w[0],):
        raise ModelError(f"weights {list(w)} and bias do not fit input {list(x)}")
    out_hw, _ = mp.transpose_conv_geometry(p, x[1:3], w[1:3])
    return [(x[0], *out_hw, w[0])]


def lower_transpose_conv_bias(lo, op: Operator) -> None:
    p = mpo.transpose_conv_params(mp.CONV_TRANSPOSE_BIAS, _raw(op))
    x, w_i, b_i, out = *op.inputs, op.outputs[0]
    w = lo.const_float(w_i)
    oc, kh, kw, _ = w.shape
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    _, (pt, pl) = mp.transpose_conv_geometry(p, in_s[1:3], (kh, kw))
    g, lsz = grid3(oc, out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "mp_transpose_conv_bias",
        [
            Buf(x),
            lo.add_const(f"t{w_i}", w),
            lo.add_const(f"t{b_i}", lo.const_float(b_i).reshape(oc)),
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (kh, kw, p.stride_height, p.stride_width, pt, pl)),
        ],
        g,
        lsz,
    )


# -- MaxPoolingWithArgmax2D / MaxUnpooling2D -----------------------------------------------


def _argmax_params(op: Operator, sg: Subgraph) -> mpo.PoolParams:
    p = mpo.pool_params(mp.MAX_POOL_ARGMAX, _raw(op))
    if p.activation not in CLAMPS:
        raise ModelError(f"Unsupported fused activation: {p.activation}.")
    return p


def max_pool_argmax_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = rank4(sg, op.inputs[0])
    (oh, ow), _ = mp.pool_geometry(_argmax_params(op, sg), x[1:3])
    if oh <= 0 or ow <= 0:
        raise ModelError(f"the window is larger than input {list(x)}")
    return [(x[0], oh, ow, x[3])] * 2


def lower_max_pool_argmax(lo, op: Operator) -> None:
    p = _argmax_params(op, lo.sg)
    x, (out, idx) = op.inputs[0], op.outputs
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    _, (pt, pl) = mp.pool_geometry(p, in_s[1:3])
    lo_clamp, hi_clamp = CLAMPS[p.activation]
    g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "mp_max_pool_argmax",
        [
            Buf(x),
            Buf(out),
            Buf(idx),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (p.filter_height, p.filter_width, p.stride_height, p.stride_width)),
            *map(np.int32, (pt, pl)),
            np.float32(lo_clamp),
            np.float32(hi_clamp),
        ],
        g,
        lsz,
    )


def max_unpool_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    p = mpo.pool_params(mp.MAX_UNPOOLING, _raw(op))
    x = rank4(sg, op.inputs[0])
    if shape_of(sg, op.inputs[1]) != x:
        raise ModelError(f"indices must match input {list(x)}")
    return [(x[0], x[1] * p.filter_height, x[2] * p.filter_width, x[3])]


def lower_max_unpool(lo, op: Operator) -> None:
    p = mpo.pool_params(mp.MAX_UNPOOLING, _raw(op))
    (x, idx), out = op.inputs, op.outputs[0]
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    pt = mp.compute_padding(p.stride_height, out_s[1], p.filter_height, in_s[1])
    pl = mp.compute_padding(p.stride_width, out_s[2], p.filter_width, in_s[2])
    g, lsz = grid3(out_s[3], out_s[2], out_s[0] * out_s[1])
    lo.emit(
        op,
        "mp_max_unpool",
        [
            Buf(x),
            Buf(idx),
            Buf(out),
            i4(in_s),
            i4(out_s),
            *map(np.int32, (p.filter_height, p.filter_width, p.stride_height, p.stride_width)),
            *map(np.int32, (pt, pl)),
        ],
        g,
        lsz,
    )


# -- Landmarks2TransformMatrix ---------------------------------------------------------------


def _landmark_attributes(op: Operator, sg: Subgraph):  # noqa: ANN202 (v1 or v2 attributes)
    raw = _raw(op)
    if op.version == 1:
        a = mpo.landmarks_to_matrix_v1(mp.LANDMARKS_TO_MATRIX, raw)
        pairs = a.subset
    else:
        a = mpo.landmarks_to_matrix_v2(mp.LANDMARKS_TO_MATRIX, raw)
        pairs = a.subset_idxs
    n = sg.tensors[op.inputs[0]].size // 3
    largest = max(a.left_rotation_idx, a.right_rotation_idx, *(i for p in pairs for i in p))
    if largest >= n:
        raise ModelError(f"landmark index {largest} is past the {n} landmarks")
    return a, np.array([i for p in pairs for i in p], np.int32)


def landmarks_to_matrix_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    x = shape_of(sg, op.inputs[0])
    fits = x[:3] == (1, 1, 1) if op.version == 1 else (x[:1] + x[2:]) == (1, 3)
    if not fits:
        raise ModelError(f"landmarks {list(x)} are not those of version {op.version}")
    return [(1, 4, 4)]


def lower_landmarks_to_matrix(lo, op: Operator) -> None:
    a, subset = _landmark_attributes(op, lo.sg)
    lm, out = op.inputs[0], op.outputs[0]
    head = [Buf(lm), Buf(out), lo.add_const(f"mp_subset{op.index}", subset)]
    head += [np.int32(subset.size), np.int32(a.left_rotation_idx), np.int32(a.right_rotation_idx)]
    if op.version == 1:
        rest = [np.int32(a.landmarks_range), np.float32(a.bbox_size_multiplier)]
        rest += [np.int32(v) for v in (*a.input_hw, *a.output_hw)]
        lo.emit(op, "mp_landmarks_to_matrix_v1", head + rest, (1,), (1,))
        return
    rest = [np.float32(a.target_rotation_radians), np.int32(a.output_height)]
    rest += [np.int32(a.output_width), np.float32(a.scale_x), np.float32(a.scale_y)]
    lo.emit(op, "mp_landmarks_to_matrix_v2", head + rest, (1,), (1,))


# -- TransformLandmarks / TransformTensorBilinear ---------------------------------------------


def _landmark_dims(op: Operator, sg: Subgraph) -> tuple[int, np.float32]:
    shape = sg.tensors[op.inputs[0]].shape
    if op.version == 1:
        dims, scale = mpo.transform_landmarks_v1(mp.TRANSFORM_LANDMARKS, _raw(op))
    else:
        dims, scale = shape[-1], np.float32(1)
    if dims not in (2, 3) or shape[-1] % dims or shape[0] != 1:
        raise ModelError(f"landmarks {list(shape)} must be batch 1 with 2 or 3 values each")
    return dims, scale


def lower_transform_landmarks(lo, op: Operator) -> None:
    dims, scale = _landmark_dims(op, lo.sg)
    (lm, m), out = op.inputs, op.outputs[0]
    n = lo.t(lm).size // dims
    lo.emit_1d(
        op,
        "mp_transform_landmarks",
        [Buf(lm), Buf(m), Buf(out), np.int32(n), np.int32(dims), np.float32(scale)],
        n,
    )


def _tensor_shapes(op: Operator, sg: Subgraph) -> None:
    x, out = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if len(x.shape) != 4 or x.shape[0] != 1 or len(out.shape) != 4 or out.shape[3] != x.shape[3]:
        raise ModelError("input and output must be batch 1 NHWC with equal channels")
    named = mpo.transform_tensor_output_hw(mp.TRANSFORM_TENSOR, _raw(op), op.version)
    if named is not None and named != tuple(out.shape[1:3]):
        raise ModelError(f"options name output size {list(named)}, the output is {out.shape}")


def transform_tensor_shapes(op: Operator, sg: Subgraph) -> list[Shape]:
    """The options' output size where they name one; else the declared (the op's only
    source), with the input's batch and channels."""
    _tensor_shapes(op, sg)
    x, out = rank4(sg, op.inputs[0]), rank4(sg, op.outputs[0], "output")
    return [(x[0], *out[1:3], x[3])]


def lower_transform_tensor(lo, op: Operator) -> None:
    (x, m), out = op.inputs, op.outputs[0]
    in_s, out_s = shape4(lo.t(x).shape), shape4(lo.t(out).shape)
    g, lsz = grid3(out_s[3], out_s[2], out_s[1])
    centres = np.int32(op.version == 2)
    lo.emit(
        op, "mp_transform_tensor", [Buf(x), Buf(m), Buf(out), i4(in_s), i4(out_s), centres], g, lsz
    )


V1, V2 = OpRule(versions(1)), OpRule(versions(2))
register(
    GpuOp(
        mp.CONV_TRANSPOSE_BIAS,
        V1,
        lower_transpose_conv_bias,
        KERNELS,
        _io(3, 1, 1, _transpose_params),
        transpose_conv_bias_shapes,
        launches=("mp_transpose_conv_bias",),
        family="mediapipe",
    ),
    GpuOp(
        mp.MAX_POOL_ARGMAX,
        V1,
        lower_max_pool_argmax,
        KERNELS,
        _io(1, 1, 2, _argmax_params),
        max_pool_argmax_shapes,
        launches=("mp_max_pool_argmax",),
        family="mediapipe",
    ),
    GpuOp(
        mp.MAX_UNPOOLING,
        V1,
        lower_max_unpool,
        KERNELS,
        _io(2, 2, 1, lambda op, sg: mpo.pool_params(mp.MAX_UNPOOLING, _raw(op))),
        max_unpool_shapes,
        launches=("mp_max_unpool",),
        family="mediapipe",
    ),
    GpuOp(
        mp.LANDMARKS_TO_MATRIX,
        V2,
        lower_landmarks_to_matrix,
        KERNELS,
        _io(1, 1, 1, _landmark_attributes),
        landmarks_to_matrix_shapes,
        launches=("mp_landmarks_to_matrix_*",),
        family="mediapipe",
    ),
    GpuOp(
        mp.TRANSFORM_LANDMARKS,
        V2,
        lower_transform_landmarks,
        KERNELS,
        _io(2, 2, 1, _landmark_dims),
        launches=("mp_transform_landmarks",),
        family="mediapipe",
    ),
    GpuOp(
        mp.TRANSFORM_TENSOR,
        V2,
        lower_transform_tensor,
        KERNELS,
        _io(2, 2, 1, _tensor_shapes),
        transform_tensor_shapes,
        launches=("mp_transform_tensor",),
        family="mediapipe",
    ),
)
