"""TFLite tensor types and their numpy dtypes."""

from __future__ import annotations

import numpy as np

#: TensorType code -> numpy dtype (types we can hold; others raise ModelError on read).
TFLITE_TO_NUMPY: dict[int, np.dtype] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    2: np.dtype(np.int32),
    3: np.dtype(np.uint8),
    4: np.dtype(np.int64),
    5: np.dtype(object),  # STRING
    6: np.dtype(np.bool_),
    7: np.dtype(np.int16),
    8: np.dtype(np.complex64),
    9: np.dtype(np.int8),
    10: np.dtype(np.float64),
    11: np.dtype(np.complex128),
    12: np.dtype(np.uint64),
    15: np.dtype(np.uint32),
    16: np.dtype(np.uint16),
}

TYPE_NAMES = {
    0: "FLOAT32",
    1: "FLOAT16",
    2: "INT32",
    3: "UINT8",
    4: "INT64",
    5: "STRING",
    6: "BOOL",
    7: "INT16",
    8: "COMPLEX64",
    9: "INT8",
    10: "FLOAT64",
    11: "COMPLEX128",
    12: "UINT64",
    13: "RESOURCE",
    14: "VARIANT",
    15: "UINT32",
    16: "UINT16",
    17: "INT4",
    18: "BFLOAT16",
}

NUMPY_TO_TFLITE: dict[np.dtype, int] = {dt: code for code, dt in TFLITE_TO_NUMPY.items()}


def tflite_type(dtype: np.dtype | type | str) -> int:
    """TensorType code of a numpy dtype."""
    return NUMPY_TO_TFLITE[np.dtype(dtype)]


def quantized_range(dtype: np.dtype) -> tuple[int, int]:
    """(qmin, qmax) of an integer dtype."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)
