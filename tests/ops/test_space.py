"""SPACE_TO_DEPTH, DEPTH_TO_SPACE, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND against LiteRT:
one one-op model per configuration."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours

RNG = np.random.default_rng(3)
#: name -> (dtype, quantization)
TYPES = {
    "float32": (np.float32, None),
    "int8": (np.int8, Quant(0.05, 5)),
    "uint8": (np.uint8, Quant(0.1, 120)),
}


def sample(shape, dtype) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return RNG.standard_normal(shape).astype(dtype)


def model_of(op: str, x: np.ndarray, consts: list, out_shape, quant, version=1, **options):
    b = ModelBuilder()
    g = b.main
    ids = [g.input("x", x.shape, x.dtype, quant=quant)]
    ids += [g.const(f"c{i}", np.asarray(c, np.int32)) for i, c in enumerate(consts)]
    y = g.tensor("y", out_shape, x.dtype, quant=quant)
    g.op(op, ids, [y], version=version, **options)
    g.output(y)
    return b.build()


# -- SPACE_TO_DEPTH / DEPTH_TO_SPACE ---------------------------------------------------------

DEPTH_CASES = {
    "block2": ((2, 4, 6, 3), 2),
    "block3": ((1, 6, 3, 2), 3),
    "block1": ((1, 2, 2, 1), 1),
}


@pytest.mark.parametrize("case", DEPTH_CASES)
@pytest.mark.parametrize("dtype", TYPES)
def test_space_to_depth(case, dtype):
    (n, h, w, c), bs = DEPTH_CASES[case]
    dt, quant = TYPES[dtype]
    x = sample((n, h, w, c), dt)
    model = model_of(
        "SPACE_TO_DEPTH",
        x,
        [],
        (n, h // bs, w // bs, c * bs * bs),
        quant,
        version=2 if quant else 1,
        block_size=bs,
    )
    assert_matches_litert(model, [x])


@pytest.mark.parametrize("case", DEPTH_CASES)
@pytest.mark.parametrize("dtype", TYPES)
def test_depth_to_space(case, dtype):
    (n, h, w, c), bs = DEPTH_CASES[case]
    dt, quant = TYPES[dtype]
    x = sample((n, h // bs, w // bs, c * bs * bs), dt)
    model = model_of(
        "DEPTH_TO_SPACE", x, [], (n, h, w, c), quant, version=2 if quant else 1, block_size=bs
    )
    assert_matches_litert(model, [x])


def test_depth_to_space_inverts_space_to_depth():
    x = sample((1, 4, 6, 3), np.float32)
    s2d = run_ours(model_of("SPACE_TO_DEPTH", x, [], (1, 2, 3, 12), None, block_size=2), [x])[0]
    d2s = model_of("DEPTH_TO_SPACE", s2d, [], (1, 4, 6, 3), None, block_size=2)
    np.testing.assert_array_equal(run_ours(d2s, [s2d])[0], x)


def test_space_to_depth_indivisible_is_a_model_error():
    x = sample((1, 3, 4, 1), np.float32)
    model = model_of("SPACE_TO_DEPTH", x, [], (1, 1, 2, 4), None, block_size=2)
    with pytest.raises(ModelError, match="multiples of block_size"):
        run_ours(model, [x])


# -- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND ---------------------------------------------------

#: name -> (input shape, block shape, paddings)
S2B_CASES = {
    "no_padding": ((1, 4, 4, 2), [2, 2], [[0, 0], [0, 0]]),
    "padding": ((2, 3, 5, 1), [2, 3], [[1, 0], [0, 1]]),
    "block_1x2": ((1, 2, 4, 3), [1, 2], [[0, 0], [1, 1]]),
    "three_d": ((2, 5, 3), [3], [[1, 0]]),
}


def _s2b_shape(shape, block, pads):
    spatial = [d + a + b for d, (a, b) in zip(shape[1 : 1 + len(pads)], pads, strict=True)]
    out = [s // k for s, k in zip(spatial, block, strict=True)]
    return (shape[0] * int(np.prod(block)), *out, *shape[1 + len(block) :])


@pytest.mark.parametrize("case", S2B_CASES)
@pytest.mark.parametrize("dtype", TYPES)
def test_space_to_batch_nd(case, dtype):
    shape, block, pads = S2B_CASES[case]
    dt, quant = TYPES[dtype]
    x = sample(shape, dt)
    model = model_of(
        "SPACE_TO_BATCH_ND",
        x,
        [block, pads],
        _s2b_shape(shape, block, pads),
        quant,
        version=2 if quant else 1,
    )
    assert_matches_litert(model, [x])


#: name -> (input shape, block shape, crops)
B2S_CASES = {
    "no_crop": ((4, 2, 2, 3), [2, 2], [[0, 0], [0, 0]]),
    "crop": ((6, 2, 3, 1), [2, 3], [[1, 0], [2, 1]]),
    "block_2x1": ((4, 3, 2, 2), [2, 1], [[0, 1], [0, 0]]),
    "three_d": ((6, 2, 3), [3], [[1, 2]]),
}


@pytest.mark.parametrize("case", B2S_CASES)
@pytest.mark.parametrize("dtype", TYPES)
def test_batch_to_space_nd(case, dtype):
    shape, block, crops = B2S_CASES[case]
    dt, quant = TYPES[dtype]
    x = sample(shape, dt)
    spatial = [
        d * k - a - b for d, k, (a, b) in zip(shape[1 : 1 + len(block)], block, crops, strict=True)
    ]
    out = (shape[0] // int(np.prod(block)), *spatial, *shape[1 + len(block) :])
    model = model_of("BATCH_TO_SPACE_ND", x, [block, crops], out, quant, version=2 if quant else 1)
    assert_matches_litert(model, [x])


def test_batch_to_space_inverts_space_to_batch():
    x = sample((2, 3, 5, 2), np.float32)
    block, pads = [2, 3], [[1, 0], [0, 1]]
    mid = _s2b_shape(x.shape, block, pads)
    s2b = run_ours(model_of("SPACE_TO_BATCH_ND", x, [block, pads], mid, None), [x])[0]
    b2s = model_of("BATCH_TO_SPACE_ND", s2b, [block, pads], x.shape, None)
    np.testing.assert_array_equal(run_ours(b2s, [s2b])[0], x)


def test_space_to_batch_indivisible_is_a_model_error():
    x = sample((1, 3, 4, 1), np.float32)
    model = model_of("SPACE_TO_BATCH_ND", x, [[2, 2], [[0, 0], [0, 0]]], (4, 1, 2, 1), None)
    with pytest.raises(ModelError, match="not a multiple"):
        run_ours(model, [x])
