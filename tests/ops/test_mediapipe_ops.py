"""MediaPipe's six custom ops on the CPU reference.

Oracles, strongest first (MediaPipe ships no kernel tests for these ops; TFLite's GPU
delegate has kernel tests with numbers for the pooling-with-indices and unpooling it maps
two of them to, transcribed here):
- Convolution2DTransposeBias: LiteRT's default interpreter, whose XNNPACK delegate runs it.
- The others have no LiteRT kernel; each is checked through an identity with LiteRT
  builtins (named in each test) and, where no identity exists (Landmarks2TransformMatrix),
  against matrices worked out by hand from MediaPipe's kernel source
  (mediapipe/util/tflite/operations/landmarks_to_transform_matrix.cc).
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import FLOAT_ATOL, FLOAT_RTOL, require, run_litert, run_ours
from flatbuffers import flexbuffers

from delegate_runtime import litert
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError

SAME, VALID = 1, 2  # TfLitePadding
RNG = np.random.default_rng(7)


def rand(shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def packed(*fields: int) -> bytes:
    """A packed int32 struct (TfLiteTransposeConvParams, TfLitePoolParams)."""
    return struct.pack(f"<{len(fields)}i", *fields)


def pool_options(padding: int, stride: tuple[int, int], k: tuple[int, int], act: int = 0) -> bytes:
    """TfLitePoolParams with its computed padding (4 ints) as MediaPipe's converter writes."""
    return packed(padding, stride[1], stride[0], k[1], k[0], act, 0, 0, 0, 0)


# -- Convolution2DTransposeBias: LiteRT (XNNPACK) ---------------------------------------------

#: name -> (input NHWC, output channels, kernel (h, w), stride (h, w), padding)
TRANSPOSE_CASES = {
    "k2_s2_same": ((1, 8, 8, 4), 3, (2, 2), (2, 2), SAME),
    "k2_s2_valid": ((1, 5, 7, 4), 2, (2, 2), (2, 2), VALID),
    "k3_s2_same_odd": ((1, 7, 5, 3), 4, (3, 3), (2, 2), SAME),
    "k3_s1_same": ((1, 6, 6, 8), 5, (3, 3), (1, 1), SAME),
    "k3_s1_valid": ((1, 6, 4, 2), 3, (3, 3), (1, 1), VALID),
    "k4_s2_same": ((1, 9, 9, 6), 6, (4, 4), (2, 2), SAME),
    "k5x3_s2x1_same": ((1, 6, 7, 3), 2, (5, 3), (2, 1), SAME),
    "k3_s3_valid": ((1, 4, 4, 5), 1, (3, 3), (3, 3), VALID),
    "k1_s1_same": ((1, 5, 5, 4), 4, (1, 1), (1, 1), SAME),
    "batch2": ((2, 4, 6, 3), 2, (2, 2), (2, 2), SAME),
}


def transpose_output_hw(in_hw, k, stride, padding) -> tuple[int, int]:
    """The output size MediaPipe's Prepare computes (transpose_conv_bias.cc)."""
    out = []
    for size, kk, s in zip(in_hw, k, stride, strict=True):
        total = max(0, kk - (size - 1) % s - 1) if padding == SAME else 0
        out.append(s * (size - 1) + kk - total)
    return out[0], out[1]


def transpose_model(shape, cout, k, stride, padding, out_shape=None, options=None) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    w = g.const("weights", rand((cout, *k, shape[3])))
    bias = g.const("bias", rand((cout,)))
    out_shape = out_shape or (shape[0], *transpose_output_hw(shape[1:3], k, stride, padding), cout)
    y = g.tensor("y", out_shape)
    raw = packed(padding, stride[1], stride[0]) if options is None else options
    g.custom_op("Convolution2DTransposeBias", [x, w, bias], [y], raw)
    g.output(y)
    return b.build()


def assert_matches_xnnpack(model: bytes, inputs: list[np.ndarray]) -> None:
    """Our outputs against LiteRT's default interpreter: its XNNPACK delegate is the only
    LiteRT path that runs Convolution2DTransposeBias (the builtin resolvers lack it)."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    expected = litert.run(model, inputs, xnnpack=True)
    got = run_ours(model, inputs)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape
        scale = max(float(np.abs(e).max(initial=0)), 1.0)
        np.testing.assert_allclose(g, e, rtol=FLOAT_RTOL, atol=FLOAT_ATOL * scale)


@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_transpose_conv_bias_matches_litert(case: str) -> None:
    """Oracle: LiteRT's default interpreter (XNNPACK runs Convolution2DTransposeBias)."""
    shape, cout, k, stride, padding = TRANSPOSE_CASES[case]
    assert_matches_xnnpack(transpose_model(shape, cout, k, stride, padding), [rand(shape)])


def test_transpose_conv_bias_reads_the_longer_struct() -> None:
    """Newer TfLiteTransposeConvParams add activation and bias type: only the first three
    fields count (MediaPipe's kernel reads no more)."""
    shape = (1, 4, 4, 2)
    model = transpose_model(shape, 2, (2, 2), (2, 2), SAME, options=packed(SAME, 2, 2, 1, 0))
    assert_matches_xnnpack(model, [rand(shape)])


# -- MaxPoolingWithArgmax2D: LiteRT MAX_POOL_2D -----------------------------------------------

#: name -> (input NHWC, stride, filter, padding, activation)
POOL_CASES = {
    "k2_s2_valid": ((1, 8, 8, 3), (2, 2), (2, 2), VALID, 0),
    "k2_s2_same_odd": ((1, 7, 5, 2), (2, 2), (2, 2), SAME, 0),
    "k3_s2_same": ((1, 9, 9, 4), (2, 2), (3, 3), SAME, 0),
    "k3_s1_same": ((1, 6, 5, 2), (1, 1), (3, 3), SAME, 0),
    "k3x2_s2x1_valid": ((2, 7, 6, 3), (2, 1), (3, 2), VALID, 0),
    "relu6": ((1, 6, 6, 2), (2, 2), (2, 2), VALID, 3),
    "relu_n1_to_1": ((1, 6, 6, 2), (2, 2), (2, 2), SAME, 2),
}
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


def pool_out_hw(in_hw, stride, k, padding) -> tuple[int, int]:
    if padding == SAME:
        return tuple((n + s - 1) // s for n, s in zip(in_hw, stride, strict=True))
    return tuple((n - kk + s) // s for n, kk, s in zip(in_hw, k, stride, strict=True))


def argmax_model(shape, stride, k, padding, act=0, options=None) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    out_shape = (shape[0], *pool_out_hw(shape[1:3], stride, k, padding), shape[3])
    y, idx = g.tensor("max", out_shape), g.tensor("argmax", out_shape)
    raw = pool_options(padding, stride, k, act) if options is None else options
    g.custom_op("MaxPoolingWithArgmax2D", [x], [y, idx], raw)
    g.output(y, idx)
    return b.build()


def max_pool_model(shape, stride, k, padding, act=0) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    y = g.tensor("max", (shape[0], *pool_out_hw(shape[1:3], stride, k, padding), shape[3]))
    g.op(
        "MAX_POOL_2D",
        [x],
        [y],
        padding="SAME" if padding == SAME else "VALID",
        stride_h=stride[0],
        stride_w=stride[1],
        filter_height=k[0],
        filter_width=k[1],
        fused_activation_function=ACTIVATION_NAMES[act],
    )
    g.output(y)
    return b.build()


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool_argmax_max_equals_litert_max_pool(case: str) -> None:
    """Oracle: LiteRT's MAX_POOL_2D on the same input gives the first output. The indices
    must point, inside each window, at an input equal to the unclamped maximum."""
    shape, stride, k, padding, act = POOL_CASES[case]
    x = rand(shape, -3, 3)
    expected = run_litert(max_pool_model(shape, stride, k, padding, act), [x])[0]
    got_max, got_idx = run_ours(argmax_model(shape, stride, k, padding, act), [x])
    np.testing.assert_array_equal(got_max, expected)
    raw_max = run_ours(argmax_model(shape, stride, k, padding), [x])[0]
    np.testing.assert_array_equal(_gather_argmax(x, got_idx, stride, k, padding), raw_max)


def _gather_argmax(x, idx, stride, k, padding) -> np.ndarray:
    """The input values the indices name (window origin + idx // kw, idx % kw)."""
    n, h, w, c = x.shape
    oh, ow = idx.shape[1:3]
    pads = [
        max((o - 1) * s + kk - size, 0) // 2
        for o, s, kk, size in zip((oh, ow), stride, k, (h, w), strict=True)
    ]
    flat = idx.astype(np.int64)
    b_i, y_i, x_i, c_i = np.indices(idx.shape)
    rows = y_i * stride[0] - pads[0] + flat // k[1]
    cols = x_i * stride[1] - pads[1] + flat % k[1]
    return x[b_i, rows, cols, c_i]


def test_max_pool_argmax_hand_case() -> None:
    """Worked by hand from max_pool_argmax.cc: the first maximum in row-major order wins
    ties, the index is filter_y * filter_width + filter_x plus 0.1."""
    x = np.array([[1, 5, 2, 2], [5, 0, 2, 2], [0, 0, 3, 9], [7, 0, 9, 1]], np.float32)
    got_max, got_idx = run_ours(
        argmax_model((1, 4, 4, 1), (2, 2), (2, 2), VALID), [x.reshape(1, 4, 4, 1)]
    )
    assert got_max[0, :, :, 0].tolist() == [[5, 2], [7, 9]]
    np.testing.assert_array_equal(
        got_idx[0, :, :, 0], np.array([[1, 0], [2, 1]], np.float32) + np.float32(0.1)
    )


# -- TFLite's GPU delegate kernel tests, transcribed ----------------------------------------------

#: tensorflow/lite/delegates/gpu/common/tasks/pooling_test_util.cc, MaxPoolingIndicesTest
#: (the delegate's pooling with output_indices, which MaxPoolingWithArgmax2D maps to): a
#: 1x2x2x2 input, 2x2 window, stride 2; maxima (8, 7) at window places (0, 3).
OFFICIAL_POOL_INPUT = np.array([8, 1, 2, 3, 4, 5, 6, 7], np.float32).reshape(1, 2, 2, 2)
OFFICIAL_POOL_MAX, OFFICIAL_POOL_PLACES = [8.0, 7.0], [0, 3]
#: tensorflow/lite/delegates/gpu/common/tasks/max_unpooling_test_util.cc, MaxUnpoolingTest
#: (the delegate's MAX_UNPOOLING_2D, which MaxUnpooling2D maps to): values 0..3 with
#: indices 0.1..3.1, 2x2 window, stride 2, into a 4x4 output.
OFFICIAL_UNPOOL_VALUES = np.array([0, 1, 2, 3], np.float32).reshape(1, 2, 2, 1)
OFFICIAL_UNPOOL_INDICES = np.array([0.1, 1.1, 2.1, 3.1], np.float32).reshape(1, 2, 2, 1)
OFFICIAL_UNPOOL_OUTPUT = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 3]


def official_pool_model() -> bytes:
    return argmax_model((1, 2, 2, 2), (2, 2), (2, 2), VALID)


def official_unpool_model() -> bytes:
    return unpool_model((1, 2, 2, 1), (2, 2), (2, 2))


def test_max_pool_argmax_official_case() -> None:
    """Oracle: TFLite GPU delegate's MaxPoolingIndicesTest numbers (integer part of the
    index, as that test reads it)."""
    got_max, got_idx = run_ours(official_pool_model(), [OFFICIAL_POOL_INPUT])
    assert got_max.reshape(-1).tolist() == OFFICIAL_POOL_MAX
    assert got_idx.reshape(-1).astype(int).tolist() == OFFICIAL_POOL_PLACES


def test_max_unpooling_official_case() -> None:
    """Oracle: TFLite GPU delegate's MaxUnpoolingTest numbers."""
    xs = [OFFICIAL_UNPOOL_VALUES, OFFICIAL_UNPOOL_INDICES]
    got = run_ours(official_unpool_model(), xs)[0]
    assert got.reshape(-1).tolist() == OFFICIAL_UNPOOL_OUTPUT


# -- MaxUnpooling2D: LiteRT MAX_POOL_2D + RESIZE_NEAREST_NEIGHBOR + EQUAL + SELECT_V2 -----------

UNPOOL_CASES = {
    "k2_s2": ((1, 8, 8, 3), (2, 2)),
    "k2_s2_odd": ((1, 6, 10, 2), (2, 2)),
    "k3_s3": ((2, 9, 6, 2), (3, 3)),
    "k2x3_s2x3": ((1, 8, 9, 4), (2, 3)),
}


def unpool_chain_model(shape, k) -> bytes:
    """MaxPoolingWithArgmax2D then MaxUnpooling2D with the same window (as MediaPipe's
    segmentation models use them)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    pooled = (shape[0], shape[1] // k[0], shape[2] // k[1], shape[3])
    y, idx = g.tensor("max", pooled), g.tensor("argmax", pooled)
    g.custom_op("MaxPoolingWithArgmax2D", [x], [y, idx], pool_options(VALID, k, k))
    out = g.tensor("unpooled", (shape[0], pooled[1] * k[0], pooled[2] * k[1], shape[3]))
    g.custom_op("MaxUnpooling2D", [y, idx], [out], pool_options(SAME, k, k))
    g.output(out)
    return b.build()


def maxima_model(shape, k) -> bytes:
    """LiteRT builtins: keep x where it equals its window's maximum, else 0."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    pooled = (shape[0], shape[1] // k[0], shape[2] // k[1], shape[3])
    full = (shape[0], pooled[1] * k[0], pooled[2] * k[1], shape[3])
    mp = g.tensor("max", pooled)
    g.op(
        "MAX_POOL_2D",
        [x],
        [mp],
        padding="VALID",
        stride_h=k[0],
        stride_w=k[1],
        filter_height=k[0],
        filter_width=k[1],
    )
    up = g.tensor("up", full)
    g.op("RESIZE_NEAREST_NEIGHBOR", [mp, g.const("size", np.array(full[1:3], np.int32))], [up])
    crop = g.tensor("crop", full)
    g.op(
        "SLICE",
        [x, g.const("begin", np.zeros(4, np.int32)), g.const("sz", np.array(full, np.int32))],
        [crop],
    )
    eq = g.tensor("eq", full, np.bool_)
    g.op("EQUAL", [crop, up], [eq])
    out = g.tensor("out", full)
    g.op("SELECT_V2", [eq, crop, g.const("zero", np.zeros((1,), np.float32))], [out])
    g.output(out)
    return b.build()


@pytest.mark.parametrize("case", UNPOOL_CASES)
def test_max_unpooling_restores_the_maxima(case: str) -> None:
    """Oracle: LiteRT builtins keeping each window's maximum in place (MAX_POOL_2D,
    RESIZE_NEAREST_NEIGHBOR, EQUAL, SELECT_V2); inputs are distinct, so maxima are unique."""
    shape, k = UNPOOL_CASES[case]
    x = RNG.permutation(np.prod(shape)).reshape(shape).astype(np.float32)
    expected = run_litert(maxima_model(shape, k), [x])[0]
    np.testing.assert_array_equal(run_ours(unpool_chain_model(shape, k), [x])[0], expected)


def unpool_model(shape, k, stride, options=None) -> bytes:
    b = ModelBuilder()
    g = b.main
    x, idx = g.input("x", shape), g.input("indices", shape)
    out = g.tensor("out", (shape[0], shape[1] * k[0], shape[2] * k[1], shape[3]))
    raw = pool_options(SAME, stride, k) if options is None else options
    g.custom_op("MaxUnpooling2D", [x, idx], [out], raw)
    g.output(out)
    return b.build()


def test_max_unpooling_hand_case() -> None:
    """Worked by hand from max_unpooling.cc: the index picks the place inside each 2x2
    window (row-major, fraction dropped); indices that land outside the output are skipped."""
    x = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 2, 2, 1)
    idx = np.array([[3.1, 0.1], [2.9, 7.1]], np.float32).reshape(1, 2, 2, 1)
    got = run_ours(unpool_model((1, 2, 2, 1), (2, 2), (2, 2)), [x, idx])[0][0, :, :, 0]
    expected = np.zeros((4, 4), np.float32)
    expected[1, 1], expected[0, 2], expected[3, 0] = 1, 2, 3  # 7 -> row 3 of window: outside
    np.testing.assert_array_equal(got, expected)


def test_max_unpooling_overlapping_windows_keep_the_later_write() -> None:
    """Stride 1 with 2x2 windows: two inputs aimed at one place; the C++ loop writes in input
    order, so the later input stays."""
    x = np.array([[5, 6]], np.float32).reshape(1, 1, 2, 1)
    idx = np.array([[1.1, 0.1]], np.float32).reshape(1, 1, 2, 1)
    got = run_ours(unpool_model((1, 1, 2, 1), (2, 2), (1, 1)), [x, idx])[0][0, :, :, 0]
    # out 2x4; padding ComputePadding(1, 4, 2, 2) = 0; both land on (0, 1)
    assert got.tolist() == [[0, 6, 0, 0], [0, 0, 0, 0]]


# -- TransformTensorBilinear: LiteRT SLICE / PAD / RESIZE_BILINEAR / TRANSPOSE --------------------


def transform_tensor_model(shape, out_hw, version, options=None) -> bytes:
    b = ModelBuilder()
    g = b.main
    x, m = g.input("x", shape), g.input("matrix", (1, 4, 4))
    out = g.tensor("out", (1, *out_hw, shape[3]))
    if options is None:
        if version == 2:
            options = flexbuffers.Dumps({"output_height": out_hw[0], "output_width": out_hw[1]})
        else:
            options = flexbuffers.Dumps({"mode": "bilinear", "output_size": list(out_hw)})
    g.custom_op("TransformTensorBilinear", [x, m], [out], options, version=version)
    g.output(out)
    return b.build()


def affine(a=1.0, b=0.0, tx=0.0, c=0.0, d=1.0, ty=0.0) -> np.ndarray:
    """The [1, 4, 4] matrix with rows (a, b, 0, tx), (c, d, 0, ty), (0, 0, 1, 0), (0, 0, 0, 1)."""
    return np.array([[a, b, 0, tx], [c, d, 0, ty], [0, 0, 1, 0], [0, 0, 0, 1]], np.float32).reshape(
        1, 4, 4
    )


def builtin_model(shape, out_shape, op: str, consts: list, **options) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape)
    out = g.tensor("out", out_shape)
    g.op(op, [x, *(g.const(f"c{i}", c) for i, c in enumerate(consts))], [out], **options)
    g.output(out)
    return b.build()


#: name -> (input shape, output (h, w), translation (y, x), version)
CROP_CASES = {
    "v2_inside": ((1, 10, 12, 3), (4, 5), (3, 6), 2),
    "v1_inside": ((1, 10, 12, 3), (4, 5), (6, 2), 1),
    "v2_to_the_edge": ((1, 8, 8, 2), (3, 4), (5, 4), 2),
    "v2_origin": ((1, 6, 7, 5), (6, 7), (0, 0), 2),
}


@pytest.mark.parametrize("case", CROP_CASES)
def test_transform_tensor_translation_is_a_crop(case: str) -> None:
    """Oracle: LiteRT SLICE. A whole-pixel translation samples pixel centres exactly (v2's
    correction cancels for a translation), so the op is a crop."""
    shape, out_hw, (ty, tx), version = CROP_CASES[case]
    x = rand(shape)
    out_shape = (1, *out_hw, shape[3])
    oracle = builtin_model(
        shape,
        out_shape,
        "SLICE",
        [np.array([0, ty, tx, 0], np.int32), np.array(out_shape, np.int32)],
    )
    expected = run_litert(oracle, [x])[0]
    got = run_ours(transform_tensor_model(shape, out_hw, version), [x, affine(tx=tx, ty=ty)])[0]
    np.testing.assert_array_equal(got, expected)


def test_transform_tensor_outside_reads_zero() -> None:
    """Oracle: LiteRT PAD then SLICE. A translation partly off the image reads 0 there."""
    shape, out_hw, (ty, tx) = (1, 6, 6, 2), (5, 5), (-2, 3)
    x = rand(shape)
    b = ModelBuilder()
    g = b.main
    xi = g.input("x", shape)
    padded = g.tensor("padded", (1, 10, 12, 2))
    g.op(
        "PAD", [xi, g.const("pads", np.array([[0, 0], [2, 2], [3, 3], [0, 0]], np.int32))], [padded]
    )
    out = g.tensor("out", (1, *out_hw, 2))
    begin = np.array([0, ty + 2, tx + 3, 0], np.int32)
    g.op(
        "SLICE",
        [padded, g.const("b", begin), g.const("s", np.array([1, *out_hw, 2], np.int32))],
        [out],
    )
    g.output(out)
    expected = run_litert(b.build(), [x])[0]
    got = run_ours(transform_tensor_model(shape, out_hw, 2), [x, affine(tx=tx, ty=ty)])[0]
    np.testing.assert_array_equal(got, expected)


#: name -> (input shape, output (h, w), version, align_corners, half_pixel_centers, scale)
RESIZE_CASES = {
    "v2_half_size_is_half_pixel_resize": ((1, 12, 16, 3), (6, 8), 2, False, True, 2.0),
    "v2_third_size_is_half_pixel_resize": ((1, 9, 12, 2), (3, 4), 2, False, True, 3.0),
    "v1_down_is_align_corners_resize": ((1, 9, 9, 2), (5, 5), 1, True, False, 2.0),
    "v1_up_is_align_corners_resize": ((1, 5, 7, 3), (9, 13), 1, True, False, 0.5),
}


@pytest.mark.parametrize("case", RESIZE_CASES)
def test_transform_tensor_scaling_is_a_resize(case: str) -> None:
    """Oracle: LiteRT RESIZE_BILINEAR. A pure scale s samples input = s*(out+0.5)-0.5 (v2)
    or s*out (v1): the half-pixel-centres or align-corners resize, all inside the image."""
    shape, out_hw, version, align, half, s = RESIZE_CASES[case]
    x = rand(shape)
    oracle = builtin_model(
        shape,
        (1, *out_hw, shape[3]),
        "RESIZE_BILINEAR",
        [np.array(out_hw, np.int32)],
        align_corners=align,
        half_pixel_centers=half,
    )
    expected = run_litert(oracle, [x])[0]
    got = run_ours(transform_tensor_model(shape, out_hw, version), [x, affine(a=s, d=s)])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_transform_tensor_swapping_axes_is_a_transpose() -> None:
    """Oracle: LiteRT TRANSPOSE [0, 2, 1, 3]. Rows (0, 1, 0, 0), (1, 0, 0, 0) read (y, x)."""
    shape = (1, 5, 7, 3)
    x = rand(shape)
    oracle = builtin_model(shape, (1, 7, 5, 3), "TRANSPOSE", [np.array([0, 2, 1, 3], np.int32)])
    expected = run_litert(oracle, [x])[0]
    m = affine(a=0, b=1, c=1, d=0)
    np.testing.assert_array_equal(
        run_ours(transform_tensor_model(shape, (7, 5), 1), [x, m])[0], expected
    )


def test_transform_tensor_hand_case() -> None:
    """Worked by hand from transform_tensor_bilinear.cc (v1): x = 0.25 + out_x reads a
    quarter of the way between neighbours; past the last column (x > w - 1) reads 0."""
    x = np.array([[0, 4, 8]], np.float32).reshape(1, 1, 3, 1)
    got = run_ours(transform_tensor_model((1, 1, 3, 1), (1, 3), 1), [x, affine(tx=0.25)])[0]
    assert got.reshape(-1).tolist() == [1.0, 5.0, 0.0]


# -- TransformLandmarks: LiteRT FULLY_CONNECTED --------------------------------------------------


def transform_landmarks_model(shape, version, options=b"") -> bytes:
    b = ModelBuilder()
    g = b.main
    x, m = g.input("landmarks", shape), g.input("matrix", (1, 4, 4))
    out = g.tensor("out", shape)
    g.custom_op("TransformLandmarks", [x, m], [out], options, version=version)
    g.output(out)
    return b.build()


def affine_fc_model(shape, dims, matrix, scale=1.0) -> bytes:
    """LiteRT: landmarks as rows [n, dims] through FULLY_CONNECTED with weights from the
    matrix's first two rows (the third column dropped: MediaPipe's landmark z is 0) and
    z passed through."""
    rows = matrix.reshape(4, 4)
    w = np.eye(dims, dtype=np.float32)
    w[0, :2], w[1, :2] = rows[0, :2], rows[1, :2]
    bias = np.zeros(dims, np.float32)
    bias[:2] = rows[:2, 3] * np.float32(scale)
    n = int(np.prod(shape)) // dims
    b = ModelBuilder()
    g = b.main
    x = g.input("landmarks", shape)
    flat = g.tensor("flat", (n, dims))
    g.op("RESHAPE", [x, g.const("s0", np.array([n, dims], np.int32))], [flat])
    y = g.tensor("y", (n, dims))
    g.op("FULLY_CONNECTED", [flat, g.const("w", w), g.const("b", bias)], [y])
    out = g.tensor("out", shape)
    g.op("RESHAPE", [y, g.const("s1", np.array(shape, np.int32))], [out])
    g.output(out)
    return b.build()


#: name -> (landmarks shape, version, dims, scale)
LANDMARK_CASES = {
    "v2_xy": ((1, 5, 2), 2, 2, 1.0),
    "v2_xyz": ((1, 71, 3), 2, 3, 1.0),
    "v1_xyz": ((1, 1, 4, 9), 1, 3, 1.0),
    "v1_xy_scaled": ((1, 2, 3, 4), 1, 2, 0.25),
}


@pytest.mark.parametrize("case", LANDMARK_CASES)
def test_transform_landmarks_is_an_affine_map(case: str) -> None:
    """Oracle: LiteRT FULLY_CONNECTED with the matrix's first two rows (column 2 ignored,
    translation times v1's scale)."""
    shape, version, dims, scale = LANDMARK_CASES[case]
    x = rand(shape, -50, 250)
    m = rand((1, 4, 4), -2, 2)  # column 2 and rows 2-3 must not matter
    options = flexbuffers.Dumps({"dimensions": dims, "scale": scale}) if version == 1 else b""
    expected = run_litert(affine_fc_model(shape, dims, m, scale), [x])[0]
    got = run_ours(transform_landmarks_model(shape, version, options), [x, m])[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-4)


# -- Landmarks2TransformMatrix: worked by hand from the kernel -------------------------------------


def landmarks_matrix_model(n: int, options: dict, version: int = 2) -> bytes:
    b = ModelBuilder()
    g = b.main
    shape = (1, n, 3) if version == 2 else (1, 1, 1, 3 * n)
    x = g.input("landmarks", shape)
    out = g.tensor("matrix", (1, 4, 4))
    g.custom_op("Landmarks2TransformMatrix", [x], [out], flexbuffers.Dumps(options), version)
    g.output(out)
    return b.build()


V2_OPTIONS = dict(
    left_rotation_idx=0,
    right_rotation_idx=1,
    output_height=16,
    output_width=16,
    scale_x=1.5,
    scale_y=1.5,
    subset_idxs=[0, 1, 2, 3],
    target_rotation_radians=0.0,
)
#: A 20 x 40 box, corners (10, 20), (30, 20), (10, 60), (30, 60); z values are ignored.
BOX = np.array([[10, 20, 5], [30, 20, -1], [10, 60, 2], [30, 60, 0]], np.float32)


def test_landmarks_to_matrix_v2_upright_box() -> None:
    """Worked by hand: left-to-right horizontal means no rotation; the crop is centred at
    (20, 40) and scales 1.5 * (20, 40) / 16 per output pixel, shifted by -8 pixels."""
    got = run_ours(landmarks_matrix_model(4, V2_OPTIONS), [BOX[None]])[0][0]
    expected = [
        [1.875, 0, 0, 20 - 8 * 1.875],
        [0, 3.75, 0, 40 - 8 * 3.75],
        [0, 0, 1, 0],
        [0, 0, 0, 1],
    ]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_landmarks_to_matrix_v2_quarter_turn() -> None:
    """Worked by hand: right landmark straight below the left one is a rotation of +90
    degrees, so the crop's x axis runs down the image: columns (0, s) and (-s, 0)."""
    pts = np.array([[50, 10, 0], [50, 30, 0], [40, 10, 0], [60, 30, 0]], np.float32)
    options = V2_OPTIONS | dict(output_height=10, output_width=10, scale_x=1.0, scale_y=1.0)
    got = run_ours(landmarks_matrix_model(4, options), [pts[None]])[0][0]
    # rotation = -pi/2: in the rotated frame the box is 20 wide (along y) and 20 high.
    s = 20 / 10
    expected = [[0, -s, 0, 50 + 5 * s], [s, 0, 0, 20 - 5 * s], [0, 0, 1, 0], [0, 0, 0, 1]]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


def test_landmarks_to_matrix_v2_odd_subset_pairs_the_last_with_itself() -> None:
    """An odd index count pairs the last index with itself (the delegate's parser)."""
    options = V2_OPTIONS | dict(subset_idxs=[0, 3, 1])
    got = run_ours(landmarks_matrix_model(4, options), [BOX[None]])[0][0]
    ref = run_ours(
        landmarks_matrix_model(4, V2_OPTIONS | dict(subset_idxs=[0, 3, 1, 1])), [BOX[None]]
    )
    np.testing.assert_array_equal(got, ref[0][0])


def test_landmarks_to_matrix_then_transform_tensor_crops_the_box() -> None:
    """The pair as face_landmark_with_attention uses it: with scale 1 a 4 x 4 crop of the box
    x = 10..30 has output pixel centres at x = 12.5, 17.5, ...; v2 reads input pixel
    coordinates (centre minus half a pixel), so an image whose value is its x reads 12, 17..."""
    options = V2_OPTIONS | dict(output_height=4, output_width=4, scale_x=1.0, scale_y=1.0)
    m = run_ours(landmarks_matrix_model(4, options), [BOX[None]])[0]
    image = np.broadcast_to(np.arange(64, dtype=np.float32)[None, None, :, None], (1, 64, 64, 1))
    got = run_ours(
        transform_tensor_model((1, 64, 64, 1), (4, 4), 2), [np.ascontiguousarray(image), m]
    )[0]
    # v2: input x = 5 * (out_x + 0.5) + 10 - 0.5
    np.testing.assert_allclose(got[0, 0, :, 0], [12.0, 17.0, 22.0, 27.0], atol=1e-4)


def test_landmarks_to_matrix_v1_upright_box() -> None:
    """Worked by hand (v1): no rotation; box 20 x 40 times 1.0 over range 100; to_absolute
    maps [-1, 1] onto a 101 x 101 image; output 11 x 11."""
    options = dict(
        dimensions=3,
        landmarks_range=100,
        left_rotation_idx=0,
        right_rotation_idx=1,
        bbox_size_multiplier=1.0,
        input_hw=[101, 101],
        output_hw=[11, 11],
        subset=[0, 1, 2, 3],
    )
    got = run_ours(landmarks_matrix_model(4, options, version=1), [BOX.reshape(1, 1, 1, 12)])[0][0]
    # itm = A R S T with A = [[50, 0, 50], [0, 50, 50]], R = [[1, 0, -0.6], [0, 1, -0.2]]
    # (middle (20, 40) / 100 * 2 - 1), S = diag(0.2, 0.4), T = [[0.2, 0, -1], [0, 0.2, -1]]
    expected = [[2, 0, 0, 10], [0, 4, 0, 20], [0, 0, 1, 0], [0, 0, 0, 1]]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


# -- bad input: a ModelError naming the op --------------------------------------------------------

BAD_MODELS = {
    "transpose_struct_too_short": (
        lambda: transpose_model((1, 4, 4, 2), 2, (2, 2), (2, 2), SAME, options=packed(SAME, 2)),
        [(1, 4, 4, 2)],
        "Convolution2DTransposeBias.*needs at least 12",
    ),
    "transpose_zero_stride": (
        lambda: transpose_model(
            (1, 4, 4, 2), 2, (2, 2), (2, 2), SAME, (1, 8, 8, 2), packed(SAME, 0, 2)
        ),
        [(1, 4, 4, 2)],
        "stride_width=0",
    ),
    "transpose_unknown_padding": (
        lambda: transpose_model((1, 4, 4, 2), 2, (2, 2), (2, 2), SAME, options=packed(7, 2, 2)),
        [(1, 4, 4, 2)],
        "padding code 7",
    ),
    "transpose_declared_shape_wrong": (
        lambda: transpose_model((1, 4, 4, 2), 2, (2, 2), (2, 2), SAME, out_shape=(1, 9, 9, 2)),
        [(1, 4, 4, 2)],
        "declared",
    ),
    "transpose_too_much_work": (
        lambda: transpose_model((1, 128, 128, 1), 1, (200, 200), (1, 1), VALID),
        [(1, 128, 128, 1)],
        "products",
    ),
    "argmax_struct_too_short": (
        lambda: argmax_model((1, 4, 4, 1), (2, 2), (2, 2), VALID, options=packed(VALID, 2, 2)),
        [(1, 4, 4, 1)],
        "MaxPoolingWithArgmax2D.*needs at least 24",
    ),
    "argmax_bad_activation": (
        lambda: argmax_model(
            (1, 4, 4, 1), (2, 2), (2, 2), VALID, options=pool_options(VALID, (2, 2), (2, 2), 42)
        ),
        [(1, 4, 4, 1)],
        "activation code 42",
    ),
    "unpool_zero_filter": (
        lambda: unpool_model((1, 2, 2, 1), (2, 2), (2, 2), options=packed(SAME, 2, 2, 0, 2, 0)),
        [(1, 2, 2, 1), (1, 2, 2, 1)],
        "filter_width=0",
    ),
    "transform_tensor_garbage_options": (
        lambda: transform_tensor_model((1, 4, 4, 1), (2, 2), 2, options=b"\x01\x02"),
        [(1, 4, 4, 1), (1, 4, 4)],
        "TransformTensorBilinear.*flexbuffer",
    ),
    "transform_tensor_options_disagree": (
        lambda: transform_tensor_model(
            (1, 4, 4, 1),
            (2, 2),
            2,
            options=flexbuffers.Dumps({"output_height": 3, "output_width": 2}),
        ),
        [(1, 4, 4, 1), (1, 4, 4)],
        "output size",
    ),
    "transform_tensor_v1_nearest": (
        lambda: transform_tensor_model(
            (1, 4, 4, 1), (2, 2), 1, options=flexbuffers.Dumps({"mode": "nearest"})
        ),
        [(1, 4, 4, 1), (1, 4, 4)],
        "only 'bilinear'",
    ),
    "landmarks_index_past_the_end": (
        lambda: landmarks_matrix_model(4, V2_OPTIONS | dict(right_rotation_idx=4)),
        [(1, 4, 3)],
        "Landmarks2TransformMatrix.*index 4 is past",
    ),
    "landmarks_empty_subset": (
        lambda: landmarks_matrix_model(4, V2_OPTIONS | dict(subset_idxs=[])),
        [(1, 4, 3)],
        "subset_idxs is empty",
    ),
    "landmarks_zero_scale": (
        lambda: landmarks_matrix_model(4, {k: v for k, v in V2_OPTIONS.items() if k != "scale_x"}),
        [(1, 4, 3)],
        "scale_x",
    ),
    "landmarks_string_index": (
        lambda: landmarks_matrix_model(4, V2_OPTIONS | dict(left_rotation_idx="a")),
        [(1, 4, 3)],
        "left_rotation_idx",
    ),
    "transform_landmarks_v1_four_dims": (
        lambda: transform_landmarks_model((1, 1, 2, 8), 1, flexbuffers.Dumps({"dimensions": 4})),
        [(1, 1, 2, 8), (1, 4, 4)],
        "TransformLandmarks.*dimensions=4",
    ),
    "transform_landmarks_v2_four_values": (
        lambda: transform_landmarks_model((1, 3, 4), 2),
        [(1, 3, 4), (1, 4, 4)],
        "2 or 3 values",
    ),
}


@pytest.mark.parametrize("case", BAD_MODELS)
def test_bad_models_are_model_errors(case: str) -> None:
    make, shapes, message = BAD_MODELS[case]
    with pytest.raises(ModelError, match=message):
        run_ours(make(), [np.ones(s, np.float32) for s in shapes])


def test_ops_are_listed() -> None:
    from delegate_runtime.ops.registry import supported_ops

    ops = supported_ops()
    assert ops["CUSTOM:Convolution2DTransposeBias"] == (1,)
    assert ops["CUSTOM:TransformTensorBilinear"] == (1, 2)
    assert {
        "CUSTOM:MaxPoolingWithArgmax2D",
        "CUSTOM:MaxUnpooling2D",
        "CUSTOM:TransformLandmarks",
        "CUSTOM:Landmarks2TransformMatrix",
    } <= set(ops)
