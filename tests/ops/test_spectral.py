"""RFFT2D, REAL, IMAG and COMPLEX_ABS against LiteRT: one one-op model per configuration,
and the spectrogram chain RFFT2D -> COMPLEX_ABS that audio front ends build."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs and orders)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def assert_both_refuse(model: bytes, feeds: list[np.ndarray], match: str) -> None:
    """LiteRT refuses the model, and we refuse it with a ModelError naming the op."""
    with pytest.raises((RuntimeError, ValueError)):
        run_litert(model, feeds)
    with pytest.raises(ModelError, match=match):
        run_ours(model, feeds)


def rfft2d_out_shape(in_shape: tuple, fft_length: tuple) -> tuple:
    return (*in_shape[:-2], fft_length[0], fft_length[1] // 2 + 1)


# -- RFFT2D ---------------------------------------------------------------------------------

#: name -> (input shape, fft_length)
RFFT2D_CASES = {
    "exact": ((4, 8), (4, 8)),
    "zero_padded": ((2, 3, 5), (4, 8)),
    "cropped": ((6, 10), (4, 8)),
    "cropped_and_padded": ((2, 9, 3), (8, 4)),
    "batched_4d": ((1, 2, 8, 8), (8, 8)),
    "height_one": ((3, 1, 16), (1, 16)),
    "smallest_width": ((5, 2), (2, 2)),
    "tall": ((16, 4), (32, 4)),
}


@pytest.mark.parametrize("case", RFFT2D_CASES, ids=RFFT2D_CASES.keys())
def test_rfft2d(case: str) -> None:
    in_shape, fft_length = RFFT2D_CASES[case]
    x = random_array(_rng("rfft2d", case), in_shape) * 2
    model, feeds = one_op(
        "RFFT2D",
        [In(x), Const(fft_length)],
        [(rfft2d_out_shape(in_shape, fft_length), np.complex64)],
    )
    assert_matches_litert(model, feeds)


RFFT2D_REFUSALS = {
    "height_not_power_of_two": ((np.float32, (4, 8)), Const([3, 8]), "power of two"),
    "width_not_power_of_two": ((np.float32, (4, 8)), Const([4, 6]), "power of two"),
    "fft_length_three_values": ((np.float32, (4, 8)), Const([4, 8, 2]), "shape \\[2\\]"),
    "fft_length_int64": ((np.float32, (4, 8)), Const([4, 8], np.int64), "fft_length dtype"),
    "int32_input": ((np.int32, (4, 8)), Const([4, 8]), "input dtype int32"),
    "one_dimension": ((np.float32, (8,)), Const([4, 8]), "at least 2 dimensions"),
}


@pytest.mark.parametrize("case", RFFT2D_REFUSALS, ids=RFFT2D_REFUSALS.keys())
def test_rfft2d_refuses(case: str) -> None:
    (dtype, shape), fft_length, match = RFFT2D_REFUSALS[case]
    x = random_array(_rng("rfft2d_bad", case), shape, dtype)
    model, feeds = one_op("RFFT2D", [In(x), fft_length], [((4, 5), np.complex64)])
    assert_both_refuse(model, feeds, match=f"RFFT2D.*{match}")


def test_rfft2d_width_one_is_the_transform() -> None:
    """LiteRT's kernel answers width 1 wrongly (imaginary = -real): no oracle, so this case
    checks ours against the transform itself (the DFT down each column)."""
    x = random_array(_rng("rfft2d_w1"), (2, 4, 3))
    model, feeds = one_op("RFFT2D", [In(x), Const([4, 1])], [((2, 4, 1), np.complex64)])
    got = run_ours(model, feeds)[0]
    k, n = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    dft = np.exp(-2j * np.pi * k * n / 4)
    np.testing.assert_allclose(got[..., 0], x[..., 0].astype(np.float64) @ dft.T, rtol=1e-5)


# -- REAL, IMAG, COMPLEX_ABS ----------------------------------------------------------------


def complex_values(key: str, shape: tuple, dtype: type) -> np.ndarray:
    rng = _rng("complex", key, shape, np.dtype(dtype).name)
    values = rng.standard_normal(shape) * 5 + 1j * rng.standard_normal(shape) * 5
    flat = values.reshape(-1)
    flat[:3] = [0, 3e-20 - 4e-20j, -2j][: flat.size]  # zero, tiny and purely imaginary
    return values.astype(dtype)


COMPLEX_CASES = [
    (op, dtype, shape)
    for op in ("REAL", "IMAG", "COMPLEX_ABS")
    for dtype in (np.complex64, np.complex128)
    for shape in ((7,), (2, 3, 4))
]


@pytest.mark.parametrize(
    "op,dtype,shape",
    COMPLEX_CASES,
    ids=[f"{o}-{np.dtype(d).name}-{len(s)}d" for o, d, s in COMPLEX_CASES],
)
def test_complex_parts(op: str, dtype: type, shape: tuple) -> None:
    x = complex_values(op, shape, dtype)
    out_dtype = np.float32 if dtype == np.complex64 else np.float64
    assert_matches_litert(*one_op(op, [In(x)], [(shape, out_dtype)]))


@pytest.mark.parametrize("op", ["REAL", "IMAG", "COMPLEX_ABS"])
def test_complex_parts_refuse_float_input(op: str) -> None:
    x = np.ones((2, 3), np.float32)
    assert_both_refuse(*one_op(op, [In(x)], [((2, 3), np.float32)]), match=f"{op}.*float32")


@pytest.mark.parametrize("op", ["REAL", "IMAG", "COMPLEX_ABS"])
def test_complex_parts_refuse_wrong_output_type(op: str) -> None:
    x = complex_values(op, (3,), np.complex64)
    assert_both_refuse(
        *one_op(op, [In(x)], [((3,), np.float64)]), match=f"{op}.*needs a float32 output"
    )


# -- the spectrogram chain ------------------------------------------------------------------


def test_rfft2d_then_magnitude() -> None:
    """|RFFT2D(frames)|, the magnitude spectrogram of an audio front end."""
    b = ModelBuilder()
    g = b.main
    frames = g.input("frames", (1, 6, 32), np.float32)
    length = g.const("fft_length", np.array([1, 64], np.int32))
    spectrum = g.tensor("spectrum", (1, 6, 1, 33), np.complex64)
    reshaped = g.tensor("frames_4d", (1, 6, 1, 32), np.float32)
    shape = g.const("shape", np.array([1, 6, 1, 32], np.int32))
    magnitude = g.tensor("magnitude", (1, 6, 1, 33), np.float32)
    g.op("RESHAPE", [frames, shape], [reshaped])
    g.op("RFFT2D", [reshaped, length], [spectrum])
    g.op("COMPLEX_ABS", [spectrum], [magnitude])
    g.output(magnitude)
    x = random_array(_rng("spectrogram"), (1, 6, 32))
    assert_matches_litert(b.build(), [x])


def test_rfft2d_reshaped_then_magnitude() -> None:
    """tf.signal.stft's conversion: RFFT2D of [frames, 1, length], the complex spectrum
    RESHAPEd to [frames, bins] (TFLite's RESHAPE copies complex64 as any other type), then
    COMPLEX_ABS."""
    b = ModelBuilder()
    g = b.main
    frames = g.input("frames", (1, 6, 1, 32), np.float32)
    length = g.const("fft_length", np.array([1, 32], np.int32))
    spectrum = g.tensor("spectrum", (1, 6, 1, 17), np.complex64)
    shape = g.const("shape", np.array([1, 6, 17], np.int32))
    bins = g.tensor("bins", (1, 6, 17), np.complex64)
    magnitude = g.tensor("magnitude", (1, 6, 17), np.float32)
    g.op("RFFT2D", [frames, length], [spectrum])
    g.op("RESHAPE", [spectrum, shape], [bins])
    g.op("COMPLEX_ABS", [bins], [magnitude])
    g.output(magnitude)
    x = random_array(_rng("stft"), (1, 6, 1, 32))
    assert_matches_litert(b.build(), [x])
