"""Shape and layout ops against LiteRT: one one-op model per configuration."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op, random_array

RNG = np.random.default_rng(7)
Q8 = Quant(0.05, 3)


def rand(shape, dtype=np.float32) -> np.ndarray:
    return random_array(RNG, shape, dtype)


# -- RESHAPE ---------------------------------------------------------------------------------

RESHAPE_CASES = {
    "shape_input_infer": ((2, 3, 4), np.float32, [4, -1], None),
    "shape_input_exact": ((2, 3, 4), np.float32, [6, 4], None),
    "options_only": ((2, 3, 4), np.float32, None, [3, 8]),
    "options_infer": ((2, 3, 4), np.float32, None, [-1, 2]),
    "to_scalar_legacy": ((1,), np.float32, None, [0]),
    "int32": ((4, 6), np.int32, [2, 2, -1], None),
    "int64_shape_values": ((4, 6), np.int64, [-1], None),
    "bool": ((4, 6), np.bool_, [24], None),
}


@pytest.mark.parametrize("case", RESHAPE_CASES)
def test_reshape(case):
    shape, dtype, target, new_shape = RESHAPE_CASES[case]
    x = rand(shape, dtype)
    expect = x.reshape(target if target is not None else (new_shape if new_shape != [0] else ()))
    args = [In(x)] + ([Const(target)] if target is not None else [])
    opts = {"new_shape": new_shape} if new_shape is not None else {}
    model, feeds = one_op("RESHAPE", args, [(expect.shape, dtype)], **opts)
    assert_matches_litert(model, feeds)


def test_reshape_int8_quantized():
    x = rand((2, 8), np.int8)
    model, feeds = one_op("RESHAPE", [In(x, Q8), Const([4, 4])], [((4, 4), np.int8, Q8)])
    assert_matches_litert(model, feeds)


def test_reshape_of_runtime_shape():
    """RESHAPE x to the SHAPE of y: the shape exists only at run time."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2, 6), np.float32)
    y = g.input("y", (3, 4), np.float32)
    s = g.tensor("s", (2,), np.int32)
    out = g.tensor("out", (1,), np.float32)  # declared wrong on purpose
    g.op("SHAPE", [y], [s], out_type="int32")
    g.op("RESHAPE", [x, s], [out])
    g.output(out)
    got = assert_matches_litert(b.build(), [rand((2, 6)), rand((3, 4))])
    assert got[0].shape == (3, 4)


def test_reshape_that_does_not_fit_is_a_model_error():
    model, feeds = one_op("RESHAPE", [In(rand((2, 3))), Const([4, -1])], [((4, 2), np.float32)])
    with pytest.raises(ModelError, match="cannot reshape 6 elements"):
        run_ours(model, feeds)


# -- SHAPE -----------------------------------------------------------------------------------


@pytest.mark.parametrize("out_type", [np.int32, np.int64])
def test_shape(out_type):
    model, feeds = one_op(
        "SHAPE", [In(rand((2, 3, 5)))], [((3,), out_type)], out_type=np.dtype(out_type).name
    )
    assert_matches_litert(model, feeds)


# -- PACK / UNPACK / SQUEEZE / EXPAND_DIMS ---------------------------------------------------

PACK_CASES = {
    "axis0": (0, np.float32, 2),
    "axis1": (1, np.float32, 3),
    "axis_last_negative": (-1, np.float32, 2),
    "int32": (0, np.int32, 3),
    "int8": (1, np.int8, 2),
}


@pytest.mark.parametrize("case", PACK_CASES)
def test_pack(case):
    axis, dtype, n = PACK_CASES[case]
    xs = [rand((2, 3), dtype) for _ in range(n)]
    expect = np.stack(xs, axis)
    q = Q8 if dtype == np.int8 else None
    model, feeds = one_op(
        "PACK", [In(x, q) for x in xs], [(expect.shape, dtype, q)], axis=axis, values_count=n
    )
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unpack(axis):
    x = rand((2, 3, 4))
    parts = [np.take(x, i, axis) for i in range(x.shape[axis])]
    model, feeds = one_op(
        "UNPACK", [In(x)], [(p.shape, np.float32) for p in parts], axis=axis, num=len(parts)
    )
    assert_matches_litert(model, feeds)


SQUEEZE_CASES = {"all": [], "one": [2], "negative": [-1], "two": [0, 2]}


@pytest.mark.parametrize("case", SQUEEZE_CASES)
def test_squeeze(case):
    x = rand((1, 3, 1, 4, 1))
    dims = SQUEEZE_CASES[case]
    expect = np.squeeze(x, tuple(dims) if dims else None)
    opts = {"squeeze_dims": dims} if dims else {}
    model, feeds = one_op("SQUEEZE", [In(x)], [(expect.shape, np.float32)], **opts)
    assert_matches_litert(model, feeds)


EXPAND_CASES = {
    "front": (0, np.int32),
    "middle": (2, np.int32),
    "end_negative": (-1, np.int32),
    "int64_axis": (1, np.int64),
}


@pytest.mark.parametrize("case", EXPAND_CASES)
def test_expand_dims(case):
    axis, axis_type = EXPAND_CASES[case]
    x = rand((2, 3, 4))
    expect = np.expand_dims(x, axis)
    model, feeds = one_op(
        "EXPAND_DIMS", [In(x), Const([axis], axis_type)], [(expect.shape, np.float32)]
    )
    assert_matches_litert(model, feeds)


# -- TRANSPOSE -------------------------------------------------------------------------------

TRANSPOSE_CASES = {
    "2d": ((3, 5), [1, 0], np.float32),
    "nhwc_to_nchw": ((2, 3, 4, 5), [0, 3, 1, 2], np.float32),
    "5d": ((2, 3, 1, 4, 2), [4, 2, 0, 3, 1], np.float32),
    "6d": ((2, 1, 3, 2, 2, 3), [5, 0, 4, 1, 3, 2], np.float32),
    "int8": ((2, 3, 4), [2, 0, 1], np.int8),
    "int32": ((2, 3, 4), [1, 2, 0], np.int32),
    "bool": ((2, 3), [1, 0], np.bool_),
}


@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_transpose(case):
    shape, perm, dtype = TRANSPOSE_CASES[case]
    x = rand(shape, dtype)
    q = Q8 if dtype == np.int8 else None
    expect = np.transpose(x, perm)
    version = 6 if len(shape) > 4 else 1
    model, feeds = one_op(
        "TRANSPOSE", [In(x, q), Const(perm)], [(expect.shape, dtype, q)], version=version
    )
    assert_matches_litert(model, feeds)


# -- CONCATENATION ---------------------------------------------------------------------------

CONCAT_CASES = {
    "channels": ([(1, 2, 2, 3), (1, 2, 2, 5)], -1, "NONE", np.float32),
    "axis0": ([(2, 3), (1, 3), (4, 3)], 0, "NONE", np.float32),
    "int32": ([(2, 3), (2, 1)], 1, "NONE", np.int32),
    "int64": ([(2, 3), (2, 1)], -1, "NONE", np.int64),
    "bool": ([(2, 3), (2, 1)], 1, "NONE", np.bool_),
}


@pytest.mark.parametrize("case", CONCAT_CASES)
def test_concatenation(case):
    shapes, axis, act, dtype = CONCAT_CASES[case]
    xs = [rand(s, dtype) * (4 if dtype == np.float32 else 1) for s in shapes]
    xs = [x.astype(dtype) for x in xs]
    expect = np.concatenate(xs, axis)
    model, feeds = one_op(
        "CONCATENATION",
        [In(x) for x in xs],
        [(expect.shape, dtype)],
        axis=axis,
        fused_activation_function=act,
    )
    assert_matches_litert(model, feeds)


CONCAT_ACTIVATIONS = {"RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}


@pytest.mark.parametrize("act", CONCAT_ACTIVATIONS)
def test_concatenation_fused_activation(act):
    """LiteRT's builtin kernel rejects a fused activation here and XNNPACK ignores it, so
    the check is against numpy: the activation is applied, as the GPU delegate does."""
    xs = [rand((2, 3)) * 4, rand((2, 2)) * 4]
    model, feeds = one_op(
        "CONCATENATION",
        [In(x) for x in xs],
        [((2, 5), np.float32)],
        axis=1,
        fused_activation_function=act,
    )
    lo, hi = CONCAT_ACTIVATIONS[act]
    np.testing.assert_array_equal(run_ours(model, feeds)[0], np.clip(np.concatenate(xs, 1), lo, hi))


def test_concatenation_int8_rescale_is_a_model_error():
    xs = [rand((1, 2), np.int8), rand((1, 3), np.int8)]
    model, feeds = one_op(
        "CONCATENATION",
        [In(xs[0], Q8), In(xs[1], Quant(0.1, 0))],
        [((1, 5), np.int8, Q8)],
        version=2,
        axis=1,
    )
    with pytest.raises(ModelError, match="quantized differently"):
        run_ours(model, feeds)


CONCAT_QUANT_CASES = {
    "int8_same_params": (np.int8, [Quant(0.05, 3), Quant(0.05, 3)], Quant(0.05, 3)),
    "int16_same_params": (np.int16, [Quant(0.001, 0), Quant(0.001, 0)], Quant(0.001, 0)),
    "uint8_same_params": (np.uint8, [Quant(0.1, 128), Quant(0.1, 128)], Quant(0.1, 128)),
    "uint8_rescaled": (np.uint8, [Quant(0.1, 128), Quant(0.03, 100)], Quant(0.07, 120)),
    "uint8_one_rescaled": (np.uint8, [Quant(0.07, 120), Quant(0.2, 10)], Quant(0.07, 120)),
}


@pytest.mark.parametrize("case", CONCAT_QUANT_CASES)
def test_concatenation_quantized(case):
    dtype, in_q, out_q = CONCAT_QUANT_CASES[case]
    info = np.iinfo(dtype)
    xs = [RNG.integers(info.min, info.max + 1, (1, 3, 3, c), dtype=dtype) for c in (2, 3)]
    model, feeds = one_op(
        "CONCATENATION",
        [In(x, q) for x, q in zip(xs, in_q, strict=True)],
        [((1, 3, 3, 5), dtype, out_q)],
        version=2,
        axis=3,
    )
    assert_matches_litert(model, feeds)


# -- CAST ------------------------------------------------------------------------------------

CAST_CASES = {
    "float_to_int32": (np.float32, np.int32),
    "int32_to_float": (np.int32, np.float32),
    "float_to_bool": (np.float32, np.bool_),
    "bool_to_float": (np.bool_, np.float32),
    "bool_to_int32": (np.bool_, np.int32),
    "int32_to_int64": (np.int32, np.int64),
    "int64_to_int32": (np.int64, np.int32),
    "uint8_to_float": (np.uint8, np.float32),
    "int8_to_int32": (np.int8, np.int32),
    "int32_to_uint8": (np.int32, np.uint8),
    "float_to_int64": (np.float32, np.int64),
    "int16_to_int32": (np.int16, np.int32),
}


@pytest.mark.parametrize("case", CAST_CASES)
def test_cast(case):
    src, dst = CAST_CASES[case]
    x = rand((3, 4), src)
    if src == np.float32:
        x = x * 10
        x.flat[:3] = [0.0, -2.5, 2.5]
    if dst == np.uint8:
        x = np.abs(x)
    model, feeds = one_op("CAST", [In(x)], [((3, 4), dst)], version=1)
    assert_matches_litert(model, feeds)


# -- GATHER / GATHER_ND ----------------------------------------------------------------------

GATHER_CASES = {
    "axis0": ((5, 3), [4, 0, 2, 2], 0, 0, np.float32),
    "axis1": ((2, 5, 3), [1, 4], 1, 0, np.float32),
    "axis_negative": ((2, 3, 5), [[0, 4], [3, 3]], -1, 0, np.float32),
    "indices_2d": ((6, 2), [[0, 1], [5, 3]], 0, 0, np.float32),
    "scalar_index": ((4, 3), 2, 0, 0, np.float32),
    "batch_dims1": ((2, 4, 3), [[0, 3], [2, 1]], 1, 1, np.float32),
    "batch_dims_negative": ((2, 4, 3), [[0, 2, 2], [2, 1, 0]], 2, -1, np.float32),
    "int8": ((5, 3), [1, 3], 0, 0, np.int8),
    "int32": ((5, 3), [1, 2], 1, 0, np.int32),
    "int64_indices": ((5, 3), np.array([4, 1], np.int64), 0, 0, np.float32),
}


@pytest.mark.parametrize("case", GATHER_CASES)
def test_gather(case):
    shape, idx, axis, batch_dims, dtype = GATHER_CASES[case]
    x = rand(shape, dtype)
    idx = np.asarray(idx, getattr(idx, "dtype", np.int32))
    ours = run_ours(
        *one_op(
            "GATHER",
            [In(x), Const(idx, idx.dtype)],
            [((1,), dtype)],
            axis=axis,
            batch_dims=batch_dims,
        )
    )[0]
    q = Q8 if dtype == np.int8 else None
    model, feeds = one_op(
        "GATHER",
        [In(x, q), Const(idx, idx.dtype)],
        [(ours.shape, dtype, q)],
        version=5 if batch_dims else 1,
        axis=axis,
        batch_dims=batch_dims,
    )
    assert_matches_litert(model, feeds)


def test_gather_out_of_range_is_a_model_error():
    model, feeds = one_op("GATHER", [In(rand((3, 2))), Const([0, 3])], [((2, 2), np.float32)])
    with pytest.raises(ModelError, match="gather index 3 is out of range"):
        run_ours(model, feeds)


GATHER_ND_CASES = {
    "depth1": ((4, 3), [[1], [3]]),
    "depth2": ((4, 3, 2), [[1, 2], [3, 0], [0, 0]]),
    "full_depth": ((4, 3), [[1, 2], [3, 0]]),
    "batched_indices": ((4, 3, 2), [[[1, 2]], [[3, 1]]]),
}


@pytest.mark.parametrize("case", GATHER_ND_CASES)
def test_gather_nd(case):
    shape, idx = GATHER_ND_CASES[case]
    x = rand(shape)
    idx = np.asarray(idx, np.int32)
    expect = x[tuple(np.moveaxis(idx, -1, 0))]
    model, feeds = one_op("GATHER_ND", [In(x), Const(idx)], [(expect.shape, np.float32)])
    assert_matches_litert(model, feeds)


# -- TILE / BROADCAST_TO / FILL / ZEROS_LIKE / RANGE ----------------------------------------

TILE_CASES = {
    "float": ((2, 3), [2, 3], np.float32),
    "int32": ((2, 1, 3), [1, 4, 2], np.int32),
    "int8": ((2, 3), [3, 1], np.int8),
    "bool": ((2,), [3], np.bool_),
}


@pytest.mark.parametrize("case", TILE_CASES)
def test_tile(case):
    shape, multiples, dtype = TILE_CASES[case]
    x = rand(shape, dtype)
    expect = np.tile(x, multiples)
    model, feeds = one_op("TILE", [In(x), Const(multiples)], [(expect.shape, dtype)])
    assert_matches_litert(model, feeds)


BROADCAST_CASES = {
    "row": ((3,), [2, 3]),
    "column": ((2, 1), [2, 4]),
    "rank_up": ((1, 3), [2, 4, 3]),
}


@pytest.mark.parametrize("case", BROADCAST_CASES)
def test_broadcast_to(case):
    shape, target = BROADCAST_CASES[case]
    x = rand(shape)
    model, feeds = one_op(
        "BROADCAST_TO", [In(x), Const(target)], [(tuple(target), np.float32)], version=2
    )
    assert_matches_litert(model, feeds)


FILL_CASES = {
    "float": (np.float32, 1.5),
    "int32": (np.int32, 7),
    "int64": (np.int64, -3),
    "bool": (np.bool_, True),
}


@pytest.mark.parametrize("case", FILL_CASES)
def test_fill(case):
    dtype, value = FILL_CASES[case]
    model, feeds = one_op(
        "FILL", [In(np.array([2, 3], np.int32)), In(np.array(value, dtype))], [((2, 3), dtype)]
    )
    assert_matches_litert(model, feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_zeros_like(dtype):
    model, feeds = one_op("ZEROS_LIKE", [In(rand((2, 3), dtype))], [((2, 3), dtype)])
    assert_matches_litert(model, feeds)


RANGE_CASES = {
    "int32": (np.int32, 2, 11, 3),
    "int32_negative_delta": (np.int32, 10, -3, -4),
    "int64": (np.int64, 0, 5, 1),
    "float": (np.float32, 0.5, 3.7, 0.3),
    "float_negative_delta": (np.float32, 2.0, -1.0, -0.7),
}


@pytest.mark.parametrize("case", RANGE_CASES)
def test_range(case):
    dtype, start, limit, delta = RANGE_CASES[case]
    feeds = [np.array(v, dtype) for v in (start, limit, delta)]
    model, feeds = one_op("RANGE", [In(f) for f in feeds], [((1,), dtype)])
    assert_matches_litert(model, feeds)


def test_range_can_be_empty():
    """LiteRT cannot hand back an empty output, so this one is ours alone."""
    feeds = [np.array(v, np.int32) for v in (3, 3, 1)]
    model, feeds = one_op("RANGE", [In(f) for f in feeds], [((0,), np.int32)])
    assert run_ours(model, feeds)[0].shape == (0,)


def test_range_with_zero_delta_is_a_model_error():
    feeds = [np.array(v, np.int32) for v in (0, 3, 0)]
    model, feeds = one_op("RANGE", [In(f) for f in feeds], [((1,), np.int32)])
    with pytest.raises(ModelError, match="delta must not be zero"):
        run_ours(model, feeds)


def test_unsupported_dtype_names_op_and_dtype():
    model, feeds = one_op(
        "RESHAPE", [In(np.zeros((2, 2), np.float64)), Const([4])], [((4,), np.float64)]
    )
    with pytest.raises(ModelError, match=r"RESHAPE.*float64"):
        run_ours(model, feeds)


def test_reshape_to_a_scalar_by_an_empty_shape_constant() -> None:
    """A converter's RESHAPE to a scalar: its shape input is a constant of shape [0], whose
    buffer is empty like a runtime tensor's (openWakeWord's hey_jarvis model): read as an
    empty constant, as TFLite reads it, not as a tensor nothing produces."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 1))
    y = g.tensor("y", ())
    g.op("RESHAPE", [x, g.const("shape", np.zeros((0,), np.int32))], [y])
    g.output(y)
    assert_matches_litert(b.build(), [np.array([[2.5]], np.float32)])
