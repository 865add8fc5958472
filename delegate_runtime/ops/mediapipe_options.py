"""Options of MediaPipe's custom TFLite ops, read exactly as MediaPipe's kernels read them.

Two encodings (mediapipe/util/tflite/operations/*.cc and TFLite's GPU delegate parsers in
delegates/gpu/common/mediapipe/):
- Convolution2DTransposeBias, MaxPoolingWithArgmax2D and MaxUnpooling2D reinterpret the
  custom options as a packed C struct of little-endian int32: TfLiteTransposeConvParams
  (padding, stride_width, stride_height, ...) and TfLitePoolParams (padding, stride_width,
  stride_height, filter_width, filter_height, activation, ...). Later fields that the
  kernels never read may be absent.
- Landmarks2TransformMatrix, TransformLandmarks and TransformTensorBilinear read a
  flexbuffer map; a missing key reads as 0 (flexbuffers' null), as in C++.

Every malformed field is a ModelError naming the op; nothing here trusts the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

#: TfLitePadding codes (kTfLitePaddingUnknown is 0).
TFLITE_PADDING_SAME, TFLITE_PADDING_VALID = 1, 2
#: TfLiteFusedActivation codes: None, Relu, ReluN1To1, Relu6, Tanh, SignBit, Sigmoid.
TFLITE_ACTIVATIONS = range(7)
#: Largest stride, filter side or output side accepted from a file.
MAX_GEOMETRY = 1 << 16


@dataclass(frozen=True)
class TransposeConvParams:
    """TfLiteTransposeConvParams, the fields MediaPipe's kernel reads."""

    padding: int
    stride_width: int
    stride_height: int


@dataclass(frozen=True)
class PoolParams:
    """TfLitePoolParams, the fields MediaPipe's kernels read."""

    padding: int
    stride_width: int
    stride_height: int
    filter_width: int
    filter_height: int
    activation: int


def _int32_fields(op: str, raw: bytes | None, names: tuple[str, ...]) -> dict[str, int]:
    """The leading int32 fields `names` of a packed struct in the custom options."""
    need = 4 * len(names)
    if not raw or len(raw) < need:
        got = len(raw) if raw else 0
        raise ModelError(
            f"{op}: custom options hold {got} bytes, the packed struct needs at least {need} "
            f"({', '.join(names)} as int32)"
        )
    return dict(zip(names, struct.unpack_from(f"<{len(names)}i", raw), strict=True))


def _check_range(op: str, name: str, value: int, lo: int, hi: int = MAX_GEOMETRY) -> None:
    if not lo <= value <= hi:
        raise ModelError(f"{op}: option {name}={value} is outside [{lo}, {hi}]")


def _check_padding(op: str, padding: int) -> None:
    if padding not in (TFLITE_PADDING_SAME, TFLITE_PADDING_VALID):
        raise ModelError(f"{op}: padding code {padding} is neither SAME (1) nor VALID (2)")


def transpose_conv_params(op: str, raw: bytes | None) -> TransposeConvParams:
    """TfLiteTransposeConvParams from Convolution2DTransposeBias's custom options."""
    f = _int32_fields(op, raw, ("padding", "stride_width", "stride_height"))
    _check_padding(op, f["padding"])
    _check_range(op, "stride_width", f["stride_width"], 1)
    _check_range(op, "stride_height", f["stride_height"], 1)
    return TransposeConvParams(**f)


def pool_params(op: str, raw: bytes | None) -> PoolParams:
    """TfLitePoolParams from MaxPoolingWithArgmax2D's or MaxUnpooling2D's custom options."""
    names = ("padding", "stride_width", "stride_height", "filter_width", "filter_height")
    f = _int32_fields(op, raw, (*names, "activation"))
    _check_padding(op, f["padding"])
    for name in names[1:]:
        _check_range(op, name, f[name], 1)
    if f["activation"] not in TFLITE_ACTIVATIONS:
        raise ModelError(f"{op}: fused activation code {f['activation']} is unknown")
    return PoolParams(**f)


# -- flexbuffer maps -------------------------------------------------------------------------


def flexbuffer_map(op: str, raw: bytes | None, required: bool = True) -> dict[str, Any]:
    """The custom options as a flexbuffer map ({} when absent and not required)."""
    from flatbuffers import flexbuffers

    if not raw:
        if required:
            raise ModelError(f"{op} has no custom options (a flexbuffer map)")
        return {}
    try:
        m = flexbuffers.Loads(bytes(raw))
    except Exception as exc:  # the flexbuffers runtime raises assorted errors on bad bytes
        raise ModelError(f"{op}: custom options are not a flexbuffer: {exc}") from exc
    if not isinstance(m, dict):
        raise ModelError(f"{op}: custom options are not a flexbuffer map")
    return m


def map_int(op: str, m: dict[str, Any], key: str) -> int:
    """An int32 value of the map, 0 when absent (flexbuffers' null reads as 0)."""
    value = m.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{op}: option {key}={value!r} is not a number")
    if isinstance(value, float) and not value.is_integer():
        raise ModelError(f"{op}: option {key}={value!r} is not an integer")
    if not -(1 << 31) <= value < 1 << 31:
        raise ModelError(f"{op}: option {key}={value!r} does not fit int32")
    return int(value)


def map_float(op: str, m: dict[str, Any], key: str) -> np.float32:
    """A float value of the map as float32, 0 when absent."""
    value = m.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{op}: option {key}={value!r} is not a number")
    with np.errstate(over="ignore"):
        f = np.float32(value)
    if not np.isfinite(f):
        raise ModelError(f"{op}: option {key}={value!r} is not a finite float32")
    return f


def map_ints(op: str, m: dict[str, Any], key: str) -> list[int]:
    """A vector of int32 values of the map, [] when absent."""
    value = m.get(key, [])
    if not isinstance(value, list):
        raise ModelError(f"{op}: option {key} is not a vector")
    return [map_int(op, {key: v}, key) for v in value]


def index_pairs(flat: list[int]) -> list[tuple[int, int]]:
    """Pairs of a flat index list; an odd last index pairs with itself (as the parsers do)."""
    pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2)]
    if len(flat) % 2:
        pairs.append((flat[-1], flat[-1]))
    return pairs


@dataclass(frozen=True)
class LandmarksToMatrixV1:
    """Landmarks2TransformMatrix v1 attributes."""

    dimensions: int
    landmarks_range: int
    left_rotation_idx: int
    right_rotation_idx: int
    bbox_size_multiplier: np.float32
    input_hw: tuple[int, int]
    output_hw: tuple[int, int]
    subset: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LandmarksToMatrixV2:
    """Landmarks2TransformMatrix v2 attributes."""

    subset_idxs: tuple[tuple[int, int], ...]
    left_rotation_idx: int
    right_rotation_idx: int
    target_rotation_radians: np.float32
    output_height: int
    output_width: int
    scale_x: np.float32
    scale_y: np.float32


def _hw(op: str, m: dict[str, Any], key: str) -> tuple[int, int]:
    hw = map_ints(op, m, key)
    if len(hw) != 2 or min(hw) <= 0:
        raise ModelError(f"{op}: option {key}={hw} must be two positive sizes (h, w)")
    return hw[0], hw[1]


def _check_indices(op: str, **indices: int) -> None:
    for name, value in indices.items():
        if value < 0:
            raise ModelError(f"{op}: option {name}={value} is negative")


def landmarks_to_matrix_v1(op: str, raw: bytes | None) -> LandmarksToMatrixV1:
    """Attributes of v1, with the checks of MediaPipe's kernel (Eval)."""
    m = flexbuffer_map(op, raw)
    subset = tuple(index_pairs(map_ints(op, m, "subset")))
    a = LandmarksToMatrixV1(
        dimensions=map_int(op, m, "dimensions"),
        landmarks_range=map_int(op, m, "landmarks_range"),
        left_rotation_idx=map_int(op, m, "left_rotation_idx"),
        right_rotation_idx=map_int(op, m, "right_rotation_idx"),
        bbox_size_multiplier=map_float(op, m, "bbox_size_multiplier"),
        input_hw=_hw(op, m, "input_hw"),
        output_hw=_hw(op, m, "output_hw"),
        subset=subset,
    )
    if a.bbox_size_multiplier == 0:
        raise ModelError(f"{op}: bbox_size_multiplier must not be 0")
    if a.dimensions != 3:
        raise ModelError(f"{op}: dimensions={a.dimensions}, must be 3")
    if a.landmarks_range <= 0:
        raise ModelError(f"{op}: landmarks_range={a.landmarks_range} must be positive")
    if not subset:
        raise ModelError(f"{op}: the landmark subset is empty")
    _check_indices(
        op, left_rotation_idx=a.left_rotation_idx, right_rotation_idx=a.right_rotation_idx
    )
    _check_indices(op, subset=min(min(p) for p in subset))
    return a


def landmarks_to_matrix_v2(op: str, raw: bytes | None) -> LandmarksToMatrixV2:
    """Attributes of v2, with the checks of MediaPipe's kernel (Eval)."""
    m = flexbuffer_map(op, raw)
    subset = tuple(index_pairs(map_ints(op, m, "subset_idxs")))
    a = LandmarksToMatrixV2(
        subset_idxs=subset,
        left_rotation_idx=map_int(op, m, "left_rotation_idx"),
        right_rotation_idx=map_int(op, m, "right_rotation_idx"),
        target_rotation_radians=map_float(op, m, "target_rotation_radians"),
        output_height=map_int(op, m, "output_height"),
        output_width=map_int(op, m, "output_width"),
        scale_x=map_float(op, m, "scale_x"),
        scale_y=map_float(op, m, "scale_y"),
    )
    _check_indices(
        op, left_rotation_idx=a.left_rotation_idx, right_rotation_idx=a.right_rotation_idx
    )
    if a.output_height <= 0 or a.output_width <= 0:
        raise ModelError(f"{op}: output size {a.output_height}x{a.output_width} must be positive")
    if a.scale_x <= 0 or a.scale_y <= 0:
        raise ModelError(f"{op}: scale_x={a.scale_x} and scale_y={a.scale_y} must be positive")
    # NOTE: MediaPipe reads landmarks[0] of an empty subset (undefined); refuse it instead.
    if not subset:
        raise ModelError(f"{op}: subset_idxs is empty")
    _check_indices(op, subset_idxs=min(min(p) for p in subset))
    return a


def transform_landmarks_v1(op: str, raw: bytes | None) -> tuple[int, np.float32]:
    """(dimensions, scale) of TransformLandmarks v1; defaults 3 and 1.0."""
    m = flexbuffer_map(op, raw, required=False)
    dims = map_int(op, m, "dimensions") if "dimensions" in m else 3
    scale = map_float(op, m, "scale") if "scale" in m else np.float32(1.0)
    if dims not in (2, 3):
        raise ModelError(f"{op}: dimensions={dims}, must be 2 or 3")
    if scale == 0:
        raise ModelError(f"{op}: scale must not be 0")
    return dims, scale


def transform_tensor_output_hw(op: str, raw: bytes | None, version: int) -> tuple[int, int] | None:
    """The output (height, width) the options name (None when they name none).

    v1 reads `output_size` [h, w] and requires `mode` "bilinear"; v2 reads `output_height`
    and `output_width`."""
    m = flexbuffer_map(op, raw, required=False)
    if version == 1:
        if "mode" in m and m["mode"] != "bilinear":
            raise ModelError(f"{op}: mode {m['mode']!r} is not supported (only 'bilinear')")
        return _hw(op, m, "output_size") if "output_size" in m else None
    if "output_height" not in m and "output_width" not in m:
        return None
    return map_int(op, m, "output_height"), map_int(op, m, "output_width")
