"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR against LiteRT: every align_corners /
half_pixel_centers combination × element type × up/down scaling, one case each."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours

RNG = np.random.default_rng(5)

#: name -> (align_corners, half_pixel_centers)
MODES = {"plain": (False, False), "align_corners": (True, False), "half_pixel": (False, True)}
#: name -> (dtype, quantization)
TYPES = {
    "float32": (np.float32, None),
    "int8": (np.int8, Quant(0.05, -4)),
    "uint8": (np.uint8, Quant(0.1, 128)),
    "int16": (np.int16, Quant(0.01, 0)),
}
#: name -> (input (N, H, W, C), output (H, W))
SIZES = {
    "up": ((2, 3, 4, 3), (7, 9)),
    "down": ((1, 8, 6, 2), (3, 4)),
    "to_one": ((1, 4, 5, 2), (1, 1)),
}


def resize_model(op: str, x: np.ndarray, size, quant, align: bool, half: bool, version: int):
    b = ModelBuilder()
    g = b.main
    xi = g.input("x", x.shape, x.dtype, quant=quant)
    si = g.const("size", np.array(size, np.int32))
    y = g.tensor("y", (x.shape[0], *size, x.shape[3]), x.dtype, quant=quant)
    g.op(op, [xi, si], [y], version=version, align_corners=align, half_pixel_centers=half)
    g.output(y)
    return b.build()


def sample(shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return RNG.standard_normal(shape).astype(dtype)


def _version(dtype, half: bool) -> int:
    if dtype == np.int16:
        return 4
    return 3 if half else (2 if dtype != np.float32 else 1)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode", MODES)
def test_resize_bilinear(mode, dtype, size):
    (align, half), (dt, quant), (shape, out) = MODES[mode], TYPES[dtype], SIZES[size]
    x = sample(shape, dt)
    model = resize_model("RESIZE_BILINEAR", x, out, quant, align, half, _version(dt, half))
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("mode", MODES)
def test_resize_nearest_neighbor(mode, dtype, size):
    (align, half), (dt, quant), (shape, out) = MODES[mode], TYPES[dtype], SIZES[size]
    x = sample(shape, dt)
    model = resize_model("RESIZE_NEAREST_NEIGHBOR", x, out, quant, align, half, _version(dt, half))
    assert_matches_litert(model, [x])


def test_bilinear_align_corners_with_half_pixel_is_a_model_error():
    x = sample((1, 2, 2, 1), np.float32)
    model = resize_model("RESIZE_BILINEAR", x, (4, 4), None, True, True, 3)
    with pytest.raises(ModelError, match="cannot both be set"):
        run_ours(model, [x])


def test_runtime_size():
    """The output size arrives at run time: the output shape comes from it."""
    b = ModelBuilder()
    g = b.main
    xi = g.input("x", (1, 3, 3, 2), np.float32)
    si = g.input("size", (2,), np.int32)
    y = g.tensor("y", (1, 1, 1, 2), np.float32)
    g.op("RESIZE_BILINEAR", [xi, si], [y], half_pixel_centers=True, version=3)
    g.output(y)
    x = sample((1, 3, 3, 2), np.float32)
    got = assert_matches_litert(b.build(), [x, np.array([5, 4], np.int32)])
    assert got[0].shape == (1, 5, 4, 2)
