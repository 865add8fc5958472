"""MediaPipe's six custom ops, as MediaPipe's own kernels define them.

Semantics from mediapipe/util/tflite/operations/*.cc (the kernels MediaPipe registers
through its op resolver); options from `mediapipe_options`. All are float32 only.

- Convolution2DTransposeBias: TFLite's reference transposed convolution plus a bias; the
  output size is stride*(in-1) + filter - pad, where SAME pads max(0, filter - (in-1) %
  stride - 1) in total, half of it (rounded down) before.
- MaxPoolingWithArgmax2D: MAX_POOL_2D plus, per output, the position of the first maximum
  inside its window (filter_y * filter_width + filter_x) as a float plus 0.1.
- MaxUnpooling2D: scatters each input value to the position its index names inside its
  window; the output is the input times the filter size; everything else is 0.
- Landmarks2TransformMatrix (v1, v2): a 4x4 matrix mapping a crop's pixels into the image,
  from landmarks: rotation from two landmarks, box from a subset of them.
- TransformLandmarks (v1, v2): x' = m00 x + m01 y + m03, y' = m10 x + m11 y + m13; z kept.
- TransformTensorBilinear (v1, v2): samples the input at the matrix's image of each output
  pixel, bilinearly, 0 outside; v2 maps pixel centres (the align-corners correction).

Arithmetic follows the C++ (float32, with the double steps where C++ promotes); where
MediaPipe would read past a tensor or divide by an unchecked zero, a ModelError says so.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ModelError
from . import mediapipe_options as mpo
from .alloc import check_alloc
from .conv import transpose_conv_core
from .registry import OpContext, register

CONV_TRANSPOSE_BIAS = "CUSTOM:Convolution2DTransposeBias"
MAX_POOL_ARGMAX = "CUSTOM:MaxPoolingWithArgmax2D"
MAX_UNPOOLING = "CUSTOM:MaxUnpooling2D"
LANDMARKS_TO_MATRIX = "CUSTOM:Landmarks2TransformMatrix"
TRANSFORM_LANDMARKS = "CUSTOM:TransformLandmarks"
TRANSFORM_TENSOR = "CUSTOM:TransformTensorBilinear"
F32 = np.float32
#: Offset MaxPoolingWithArgmax2D adds to each index so that a float-to-int cast is exact.
ARGMAX_OFFSET = F32(0.1)


def _float_io(ctx: OpContext, n_in: int, n_out: int, ranks: tuple[int, ...]) -> None:
    """Input/output counts, float32 everywhere, and the inputs' ranks."""
    where = ctx.op.describe()
    if len(ctx.inputs) != n_in or len(ctx.op.outputs) != n_out:
        raise ModelError(f"{where} takes {n_in} inputs and gives {n_out} outputs")
    for i, (x, rank) in enumerate(zip(ctx.inputs, ranks, strict=True)):
        if x is None or x.dtype != np.float32:
            raise ModelError(f"{where}: input {i} must be float32")
        if x.ndim != rank:
            raise ModelError(f"{where}: input {i} must be rank {rank}, got {list(x.shape)}")
    if any(t.dtype != np.float32 for t in ctx.out_tensors):
        raise ModelError(f"{where}: outputs must be float32")


def _check_output_shape(ctx: OpContext, shape: tuple[int, ...], i: int = 0) -> None:
    t = ctx.out_tensors[i]
    if tuple(t.shape) != tuple(shape):
        raise ModelError(
            f"{ctx.op.describe()}: output '{t.name}' is declared {list(t.shape)} but the op "
            f"gives {list(shape)}"
        )


def _activation_clamp(x: np.ndarray, act: int) -> np.ndarray:
    """TFLite's CalculateActivationRange for floats: only the Relu family clamps."""
    bounds = {1: (0.0, None), 2: (-1.0, 1.0), 3: (0.0, 6.0)}.get(act)
    if bounds is None:
        return x
    return np.clip(x, bounds[0], bounds[1]).astype(F32, copy=False)


# -- Convolution2DTransposeBias ------------------------------------------------------------


def transpose_conv_geometry(
    p: mpo.TransposeConvParams, in_hw: tuple[int, int], k_hw: tuple[int, int]
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(output (h, w), leading padding (top, left)) as MediaPipe's Prepare computes them."""
    out, pad = [], []
    for size, k, s in zip(in_hw, k_hw, (p.stride_height, p.stride_width), strict=True):
        total = max(0, k - (size - 1) % s - 1) if p.padding == mpo.TFLITE_PADDING_SAME else 0
        out.append(s * (size - 1) + k - total)
        pad.append(total // 2)
    return (out[0], out[1]), (pad[0], pad[1])


@register(CONV_TRANSPOSE_BIAS, versions=(1,))
def convolution_2d_transpose_bias(ctx: OpContext) -> np.ndarray:
    """Transposed convolution of NHWC input with OHWI weights, plus a per-channel bias."""
    p = mpo.transpose_conv_params(CONV_TRANSPOSE_BIAS, ctx.opt("custom_options"))
    _float_io(ctx, 3, 1, (4, 4, 1))
    x, w, bias = ctx.inputs
    if w.shape[0] != bias.shape[0] or w.shape[3] != x.shape[3]:
        raise ModelError(
            f"{ctx.op.describe()}: weights {list(w.shape)} and bias {list(bias.shape)} do not "
            f"fit input {list(x.shape)} (OHWI weights, one bias per output channel)"
        )
    out_hw, pad = transpose_conv_geometry(p, x.shape[1:3], w.shape[1:3])
    _check_output_shape(ctx, (x.shape[0], *out_hw, w.shape[0]))
    # the products of every input pixel with every tap, held at once by the core
    check_alloc((*x.shape[:3], *w.shape[:3]), F32, f"{ctx.op.describe()}: products")
    acc = transpose_conv_core(x, w, out_hw, (p.stride_height, p.stride_width), pad)
    return (acc + bias).astype(F32, copy=False)


# -- MaxPoolingWithArgmax2D / MaxUnpooling2D ---------------------------------------------------


def compute_padding(stride: int, in_size: int, filter_size: int, out_size: int) -> int:
    """TFLite's ComputePadding (dilation 1): leading padding, never negative."""
    return max((out_size - 1) * stride + filter_size - in_size, 0) // 2


def pool_geometry(p: mpo.PoolParams, in_hw: tuple[int, int]) -> tuple[list[int], list[int]]:
    """(output (h, w), leading padding (top, left)) of MaxPoolingWithArgmax2D."""
    out, pad = [], []
    for size, k, s in zip(
        in_hw, (p.filter_height, p.filter_width), (p.stride_height, p.stride_width), strict=True
    ):
        o = (size + s - 1) // s if p.padding == mpo.TFLITE_PADDING_SAME else (size - k + s) // s
        out.append(o)
        pad.append(compute_padding(s, size, k, o))
    return out, pad


@register(MAX_POOL_ARGMAX, versions=(1,))
def max_pooling_with_argmax_2d(ctx: OpContext) -> list[np.ndarray]:
    """Max pooling and the in-window position of each maximum (float, plus 0.1)."""
    p = mpo.pool_params(MAX_POOL_ARGMAX, ctx.opt("custom_options"))
    _float_io(ctx, 1, 2, (4,))
    x = ctx.inputs[0]
    n, h, w, c = x.shape
    (oh, ow), (pt, pl) = pool_geometry(p, (h, w))
    if oh <= 0 or ow <= 0:
        raise ModelError(f"{ctx.op.describe()}: the window is larger than input {list(x.shape)}")
    for i in range(2):
        _check_output_shape(ctx, (n, oh, ow, c), i)
    (sh, sw), (fh, fw) = (p.stride_height, p.stride_width), (p.filter_height, p.filter_width)
    rows, cols = max((oh - 1) * sh + fh, pt + h), max((ow - 1) * sw + fw, pl + w)
    xp = np.full((n, rows, cols, c), -np.inf, F32)  # padding never wins a strict >
    xp[:, pt : pt + h, pl : pl + w] = x
    best = np.full((n, oh, ow, c), np.finfo(F32).min, F32)  # C++ starts at lowest()
    where = np.zeros((n, oh, ow, c), np.int64)
    for fy in range(fh):
        for fx in range(fw):
            cur = xp[:, fy : fy + (oh - 1) * sh + 1 : sh, fx : fx + (ow - 1) * sw + 1 : sw]
            wins = cur > best  # strict: the first maximum in row-major order stays
            best = np.where(wins, cur, best)
            where = np.where(wins, fy * fw + fx, where)
    return [_activation_clamp(best, p.activation), where.astype(F32) + ARGMAX_OFFSET]


def _c_div_mod(a: np.ndarray, b: int) -> tuple[np.ndarray, np.ndarray]:
    """C's truncating integer division and remainder."""
    q = np.trunc(a / b).astype(np.int64)
    return q, a - q * b


@register(MAX_UNPOOLING, versions=(1,))
def max_unpooling_2d(ctx: OpContext) -> np.ndarray:
    """Each input value written where its index points in its window; the rest is 0."""
    p = mpo.pool_params(MAX_UNPOOLING, ctx.opt("custom_options"))
    _float_io(ctx, 2, 1, (4, 4))
    x, indices = ctx.inputs
    if indices.shape != x.shape:
        raise ModelError(
            f"{ctx.op.describe()}: indices {list(indices.shape)} must match input {list(x.shape)}"
        )
    n, h, w, c = x.shape
    (fh, fw), (sh, sw) = (p.filter_height, p.filter_width), (p.stride_height, p.stride_width)
    oh, ow = h * fh, w * fw
    _check_output_shape(ctx, (n, oh, ow, c))
    pt, pl = compute_padding(sh, oh, fh, h), compute_padding(sw, ow, fw, w)
    # NOTE: C++ casts the float index to int; indices that no int holds land nowhere.
    fits = np.isfinite(indices) & (np.abs(indices) < 2**31)
    idx = np.trunc(np.where(fits, indices, 0)).astype(np.int64)
    max_y, max_x = _c_div_mod(idx, fw)
    b_i, y_i, x_i, c_i = np.indices(x.shape, sparse=True)
    out_y = y_i * sh - pt + max_y
    out_x = x_i * sw - pl + max_x
    ok = fits & (out_y >= 0) & (out_y < oh) & (out_x >= 0) & (out_x < ow)
    flat = np.ravel_multi_index(
        np.broadcast_arrays(b_i, np.where(ok, out_y, 0), np.where(ok, out_x, 0), c_i),
        (n, oh, ow, c),
    )[ok]
    values = x[ok]
    # C++ writes in input order, so of two inputs aimed at one place the later one stays.
    last = len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1]
    out = np.zeros(n * oh * ow * c, F32)
    out[flat[last]] = values[last]
    return out.reshape(n, oh, ow, c)


# -- matrices in float32, summed in the C++ order -------------------------------------------


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float32, each sum accumulated from 0 over k in order (Mat3/Mat4 operator*)."""
    acc = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        acc = acc + a[:, k : k + 1] * b[k : k + 1, :]
    return acc


def _rot3(r: np.float32) -> np.ndarray:
    c, s = F32(math.cos(r)), F32(math.sin(r))
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], F32)


def _landmark(points: np.ndarray, i: int, op: str) -> np.ndarray:
    if i >= len(points):
        raise ModelError(f"{op}: landmark index {i} is past the {len(points)} landmarks")
    return points[i]


def _landmarks_to_matrix_v2(a: mpo.LandmarksToMatrixV2, points: np.ndarray, op: str) -> np.ndarray:
    left, right = (
        _landmark(points, a.left_rotation_idx, op),
        _landmark(points, a.right_rotation_idx, op),
    )
    rotation = F32(math.atan2(right[1] - left[1], right[0] - left[0]))
    rotation = a.target_rotation_radians - rotation
    chosen = np.array([_landmark(points, i, op) for pair in a.subset_idxs for i in pair], F32)
    homogeneous = np.concatenate([chosen[:, :2], np.ones((len(chosen), 1), F32)], axis=1)
    rotated = _matmul(_rot3(rotation), homogeneous.T).T
    hi, lo = rotated.max(axis=0), rotated.min(axis=0)
    crop_w, crop_h = hi[0] - lo[0], hi[1] - lo[1]
    centre = np.array([(lo[0] + hi[0]) / F32(2), (lo[1] + hi[1]) / F32(2), lo[2]], F32)
    crop_x, crop_y = _matmul(_rot3(-rotation), centre[:, None])[:2, 0]
    r = -rotation
    c, s = F32(math.cos(r)), F32(math.sin(r))
    scale_x = a.scale_x * crop_w / F32(a.output_width)
    scale_y = a.scale_y * crop_h / F32(a.output_height)
    shift_x, shift_y = F32(-(a.output_width / 2.0)), F32(-(a.output_height / 2.0))
    steps = [
        [[1, 0, 0, crop_x], [0, 1, 0, crop_y], [0, 0, 1, 0], [0, 0, 0, 1]],
        [[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
        [[scale_x, 0, 0, 0], [0, scale_y, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
        [[1, 0, 0, shift_x], [0, 1, 0, shift_y], [0, 0, 1, 0], [0, 0, 0, 1]],
    ]
    t = np.eye(4, dtype=F32)
    for step in steps:
        t = _matmul(t, np.array(step, F32))
    return t


def _landmarks_to_matrix_v1(a: mpo.LandmarksToMatrixV1, points: np.ndarray, op: str) -> np.ndarray:
    left, right = (
        _landmark(points, a.left_rotation_idx, op),
        _landmark(points, a.right_rotation_idx, op),
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = F32(-F32(math.atan((right[1] - left[1]) / (right[0] - left[0]))))
    c, s = F32(math.cos(alpha)), F32(math.sin(alpha))
    hi, lo = np.full(2, -100000, F32), np.full(2, 100000, F32)
    for pair in a.subset:
        for i in pair:
            x, y = _landmark(points, i, op)[:2]
            rotated = np.array([x * c - y * s, x * s + y * c], F32)
            hi, lo = np.maximum(hi, rotated), np.minimum(lo, rotated)
    rng = F32(a.landmarks_range)
    box = (hi - lo) * a.bbox_size_multiplier
    middle = np.array([(hi[0] + lo[0]) / 2.0, (hi[1] + lo[1]) / 2.0], F32)
    cn, sn = F32(math.cos(-alpha)), F32(math.sin(-alpha))
    rm = np.array([middle[0] * cn - middle[1] * sn, middle[0] * sn + middle[1] * cn], F32)
    (in_h, in_w), (out_h, out_w) = a.input_hw, a.output_hw
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.array([[box[0] / rng, 0, 0], [0, box[1] / rng, 0], [0, 0, 1]], F32)
        rotation = np.array(
            [[cn, -sn, rm[0] / rng * 2.0 - 1.0], [sn, cn, rm[1] / rng * 2.0 - 1.0], [0, 0, 1]],
            F32,
        )
        to_relative = np.array(
            [[2.0 / (out_w - 1.0), 0, -1], [0, 2.0 / (out_h - 1.0), -1], [0, 0, 1]], F32
        )
    half_w, half_h = (in_w - 1.0) / 2.0, (in_h - 1.0) / 2.0
    to_absolute = np.array([[half_w, 0, half_w], [0, half_h, half_h], [0, 0, 1]], F32)
    m = _matmul(_matmul(_matmul(to_absolute, rotation), scale), to_relative)
    return np.array(
        [[m[0, 0], m[0, 1], 0, m[0, 2]], [m[1, 0], m[1, 1], 0, m[1, 2]], [*m[2], 0], [0, 0, 0, 1]],
        F32,
    )


@register(LANDMARKS_TO_MATRIX, versions=(1, 2))
def landmarks_to_transform_matrix(ctx: OpContext) -> np.ndarray:
    """The 4x4 matrix from a crop's pixels to the image, from 3-D landmarks."""
    op, raw, v1 = LANDMARKS_TO_MATRIX, ctx.opt("custom_options"), ctx.op.version == 1
    _float_io(ctx, 1, 1, (4 if v1 else 3,))
    x = ctx.inputs[0]
    fits = x.shape[:3] == (1, 1, 1) if v1 else (x.shape[0], x.shape[2]) == (1, 3)
    if not fits:
        want = "[1, 1, 1, 3n]" if v1 else "[1, n, 3]"
        raise ModelError(f"{ctx.op.describe()}: landmarks must be {want}, got {list(x.shape)}")
    _check_output_shape(ctx, (1, 4, 4))
    points = x.reshape(-1)[: x.size // 3 * 3].reshape(-1, 3)
    with np.errstate(all="ignore"):
        if v1:
            m = _landmarks_to_matrix_v1(mpo.landmarks_to_matrix_v1(op, raw), points, op)
        else:
            m = _landmarks_to_matrix_v2(mpo.landmarks_to_matrix_v2(op, raw), points, op)
    return m.reshape(1, 4, 4)


# -- TransformLandmarks / TransformTensorBilinear ---------------------------------------------


def _matrix_rows(ctx: OpContext) -> np.ndarray:
    """The first two rows of the [1, 4, 4] matrix input, float32 [2, 4]."""
    m = ctx.inputs[1]
    if m.size != 16:
        raise ModelError(f"{ctx.op.describe()}: the matrix must be [1, 4, 4], got {list(m.shape)}")
    return m.reshape(4, 4)[:2]


def _dot4(row: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """row . (x, y, 0, 1) in float32, summed left to right (DotProduct)."""
    return ((row[0] * x + row[1] * y) + row[2] * F32(0)) + row[3] * F32(1)


@register(TRANSFORM_LANDMARKS, versions=(1, 2))
def transform_landmarks(ctx: OpContext) -> np.ndarray:
    """x and y of each landmark through the matrix's first two rows; z as it was."""
    v1 = ctx.op.version == 1
    _float_io(ctx, 2, 1, (4 if v1 else 3, 3))
    x = ctx.inputs[0]
    if v1:
        dims, scale = mpo.transform_landmarks_v1(TRANSFORM_LANDMARKS, ctx.opt("custom_options"))
    else:  # v2 takes the dimensions from the output's last axis
        dims, scale = x.shape[-1], F32(1)
    if x.shape[0] != 1 or dims not in (2, 3) or x.shape[-1] % dims:
        raise ModelError(
            f"{ctx.op.describe()}: landmarks {list(x.shape)} must be batch 1 with 2 or 3 values "
            "each"
        )
    _check_output_shape(ctx, x.shape)
    rows = _matrix_rows(ctx).copy()
    rows[:, 3] *= scale
    points = x.reshape(-1, dims)
    out = points.copy()
    out[:, 0] = _dot4(rows[0], points[:, 0], points[:, 1])
    out[:, 1] = _dot4(rows[1], points[:, 0], points[:, 1])
    return out.reshape(x.shape)


def sample_coordinates(rows: np.ndarray, oh: int, ow: int, centres: bool) -> np.ndarray:
    """Input (x, y) of every output pixel, float32 [oh, ow, 2]; `centres` is v2's correction."""
    rows = rows.copy()
    if centres:  # T -> S (T A), A and S shifting by +-0.5: computed in double as in C++
        for r in rows:
            r[3] = F32(float(r[3]) + (float(r[0]) * 0.5 + float(r[1]) * 0.5 - 0.5))
    ys, xs = np.meshgrid(np.arange(oh, dtype=F32), np.arange(ow, dtype=F32), indexing="ij")
    return np.stack([_dot4(rows[0], xs, ys), _dot4(rows[1], xs, ys)], axis=-1)


def bilinear_sample(x: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """MediaPipe's bilinear read of HWC `x` at float (x, y) `coords`; 0 outside the image."""
    h, w, c = x.shape
    tx, ty = coords[..., 0], coords[..., 1]
    inside = (tx >= 0) & (tx <= w - 1) & (ty >= 0) & (ty <= h - 1)  # NaN lands outside
    fx, fy = np.floor(np.where(inside, tx, 0)), np.floor(np.where(inside, ty, 0))
    ix, iy = fx.astype(np.int64), fy.astype(np.int64)
    padded = np.zeros((h + 1, w + 1, c), F32)  # the row and column past the edge read 0
    padded[:h, :w] = x
    q11, q21 = padded[iy, ix], padded[iy, ix + 1]
    q12, q22 = padded[iy + 1, ix], padded[iy + 1, ix + 1]
    rc = (np.where(inside, tx, 0) - fx)[..., None].astype(F32)
    lc = (np.where(inside, ty, 0) - fy)[..., None].astype(F32)
    # (1.0 - c) is double in C++: each weighted sum is taken in double, stored as float.
    upper = ((1.0 - rc.astype(np.float64)) * q11 + (rc * q21).astype(np.float64)).astype(F32)
    lower = ((1.0 - rc.astype(np.float64)) * q12 + (rc * q22).astype(np.float64)).astype(F32)
    result = ((lc * lower).astype(np.float64) + (1.0 - lc.astype(np.float64)) * upper).astype(F32)
    return np.where(inside[..., None], result, F32(0))


@register(TRANSFORM_TENSOR, versions=(1, 2))
def transform_tensor_bilinear(ctx: OpContext) -> np.ndarray:
    """The input resampled through a 4x4 matrix into the output's height and width."""
    _float_io(ctx, 2, 1, (4, 3))
    x = ctx.inputs[0]
    out_shape = tuple(ctx.out_tensors[0].shape)
    if x.shape[0] != 1 or len(out_shape) != 4 or out_shape[0] != 1 or out_shape[3] != x.shape[3]:
        raise ModelError(
            f"{ctx.op.describe()}: input {list(x.shape)} and output {list(out_shape)} must be "
            "batch 1 with equal channels"
        )
    named = mpo.transform_tensor_output_hw(
        TRANSFORM_TENSOR, ctx.opt("custom_options"), ctx.op.version
    )
    if named is not None and named != out_shape[1:3]:
        raise ModelError(
            f"{ctx.op.describe()}: options name output size {list(named)} but the output is "
            f"{list(out_shape)}"
        )
    coords = sample_coordinates(_matrix_rows(ctx), *out_shape[1:3], ctx.op.version == 2)
    return bilinear_sample(x[0], coords)[None]
