"""Image preprocessing for task accuracy: central crop, bilinear resize, normalisation,
and the model input's dtype (float, or quantized: TFLite's raw pixels or quantized floats).

Defaults follow TFLite's ImageNet evaluation: crop the central 87.5%, resize to the input
size, float inputs as (pixel - 127.5) / 127.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import JobError, ModelError
from ...graph import Tensor

QUANTIZED_MODES = ("quantize", "raw")


@dataclass
class Preprocess:
    """How images become model inputs."""

    crop_fraction: float = 0.875  #: central crop kept, of each side (1.0: none)
    input_mean: float = 127.5  #: float input = (pixel - mean) / std
    input_std: float = 127.5
    #: quantized inputs: "quantize" the normalised floats with the input's scale and zero
    #: point, or "raw": uint8 pixels as they are, int8 pixels - 128 (TFLite's tools)
    quantized_input: str = "quantize"

    def validate(self) -> None:
        if not 0 < self.crop_fraction <= 1:
            raise JobError(f"crop fraction must be in (0, 1], got {self.crop_fraction}")
        if self.input_std == 0:
            raise JobError("input std must not be 0")
        if self.quantized_input not in QUANTIZED_MODES:
            raise JobError(f"quantized input mode must be one of {', '.join(QUANTIZED_MODES)}")


def input_geometry(t: Tensor) -> tuple[int, int, int]:
    """(height, width, channels) of an NHWC image input."""
    if len(t.shape) != 4 or t.shape[0] != 1 or t.shape[3] not in (1, 3):
        raise ModelError(
            f"input '{t.name}' of shape {list(t.shape)} is not a [1, H, W, 1|3] image input"
        )
    return int(t.shape[1]), int(t.shape[2]), int(t.shape[3])


def load_image(path: str | Path, channels: int = 3) -> np.ndarray:
    """An image file as an HxWxC uint8 array (RGB or grey)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB" if channels == 3 else "L"), np.uint8).reshape(
                img.height, img.width, channels
            )
    except (OSError, UnidentifiedImageError) as exc:
        raise JobError(f"cannot read image {path}: {exc}") from exc


def crop_and_resize(pixels: np.ndarray, height: int, width: int, fraction: float) -> np.ndarray:
    """Central crop of `fraction` of each side, then bilinear resize; float32 pixels."""
    from PIL import Image

    h, w = pixels.shape[:2]
    ch, cw = max(1, round(h * fraction)), max(1, round(w * fraction))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = pixels[top : top + ch, left : left + cw]
    channels = crop.shape[2]
    planes = []
    for c in range(channels):  # resize each channel in float, no 8-bit rounding
        img = Image.fromarray(crop[:, :, c].astype(np.float32), mode="F")
        planes.append(np.asarray(img.resize((width, height), Image.BILINEAR), np.float32))
    return np.stack(planes, axis=-1)


def to_input(pixels: np.ndarray, t: Tensor, pre: Preprocess) -> np.ndarray:
    """Float pixels (0..255) as a batch-of-one array of the input tensor's dtype."""
    x = pixels[np.newaxis]
    if t.dtype.kind == "f":
        return ((x - pre.input_mean) / pre.input_std).astype(t.dtype)
    if t.dtype not in (np.dtype(np.uint8), np.dtype(np.int8)):
        raise ModelError(f"input '{t.name}' of type {t.dtype} is not an image input")
    info = np.iinfo(t.dtype)
    if pre.quantized_input == "raw":
        shifted = x - 128.0 if t.dtype == np.int8 else x
        return np.clip(np.round(shifted), info.min, info.max).astype(t.dtype)
    q = t.quantization
    if q is None or q.per_channel:
        raise ModelError(f"input '{t.name}' has no per-tensor quantization to quantize with")
    real = (x - pre.input_mean) / pre.input_std
    scaled = np.round(real / float(q.scale[0])) + int(q.zero_point[0])
    return np.clip(scaled, info.min, info.max).astype(t.dtype)


def prepare(path: str | Path, t: Tensor, pre: Preprocess) -> np.ndarray:
    """An image file as the model input `t`."""
    height, width, channels = input_geometry(t)
    pixels = load_image(path, channels)
    return to_input(crop_and_resize(pixels, height, width, pre.crop_fraction), t, pre)


def dequantized(x: np.ndarray, t: Tensor) -> np.ndarray:
    """An output as float: quantized outputs through their scale and zero point."""
    q = t.quantization
    if x.dtype.kind in "iu" and q is not None and not q.per_channel:
        return (x.astype(np.float64) - int(q.zero_point[0])) * float(q.scale[0])
    return x.astype(np.float64)
