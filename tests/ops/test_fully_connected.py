"""FULLY_CONNECTED and BATCH_MATMUL against LiteRT, one case per configuration."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from tests.ops.conftest import assert_matches_litert

ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _rng(*key: object) -> np.random.Generator:
    """A generator seeded by the case's parameters (stable across runs)."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def fc_model(x_shape, w, bias, out_shape, version, dtype=np.float32, quants=None, **options):
    """A one-op FULLY_CONNECTED model; bias None means two inputs."""
    qx, qw, qb, qo = quants or (None, None, None, None)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", x_shape, dtype, quant=qx)
    inputs = [x, g.const("w", w, quant=qw)]
    if bias is not None:
        inputs.append(g.const("b", bias, quant=qb))
    y = g.tensor("y", out_shape, dtype, quant=qo)
    g.op("FULLY_CONNECTED", inputs, [y], version=version, **options)
    g.output(y)
    return b.build()


def _fc_out_shape(x_shape, units, keep_num_dims):
    if keep_num_dims:
        return (*x_shape[:-1], units)
    return (int(np.prod(x_shape[:-1])), units)


# -- float FULLY_CONNECTED -------------------------------------------------------------------

FLOAT_FC = list(
    itertools.product(
        ((3, 16), (2, 3, 16), (2, 2, 3, 16)), (False, True), (True, False), ACTIVATIONS
    )
)


@pytest.mark.parametrize("x_shape,keep_num_dims,with_bias,act", FLOAT_FC)
def test_fc_float(x_shape, keep_num_dims, with_bias, act):
    rng = _rng("fc", x_shape, keep_num_dims, with_bias, act)
    units = 7
    w = rng.standard_normal((units, x_shape[-1])).astype(np.float32)
    bias = rng.standard_normal(units).astype(np.float32) if with_bias else None
    version = 6 if not with_bias else (5 if keep_num_dims else 1)
    model = fc_model(
        x_shape,
        w,
        bias,
        _fc_out_shape(x_shape, units, keep_num_dims),
        version,
        keep_num_dims=keep_num_dims,
        fused_activation_function=act,
    )
    assert_matches_litert(model, [rng.standard_normal(x_shape).astype(np.float32)])


def test_fc_float_flattens_input():
    rng = _rng("fc-flatten")
    w = rng.standard_normal((5, 12)).astype(np.float32)
    bias = rng.standard_normal(5).astype(np.float32)
    model = fc_model((2, 3, 4), w, bias, (2, 5), 1)
    assert_matches_litert(model, [rng.standard_normal((2, 3, 4)).astype(np.float32)])


def test_fc_float_runtime_weights():
    rng = _rng("fc-runtime-w")
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (4, 8), np.float32)
    w = g.input("w", (5, 8), np.float32)
    y = g.tensor("y", (4, 5), np.float32)
    g.op("FULLY_CONNECTED", [x, w], [y], version=6)
    g.output(y)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (5, 8))]
    assert_matches_litert(b.build(), inputs)


# -- quantized FULLY_CONNECTED ---------------------------------------------------------------


def _quant_fc_case(qtype, per_channel, keep_num_dims, with_bias, act, rng):
    dtype = np.int8 if qtype == "int8" else np.uint8
    info = np.iinfo(dtype)
    x_shape, units = (2, 3, 24), 6
    if qtype == "int8":
        w = rng.integers(-127, 128, (units, x_shape[-1])).astype(np.int8)
        w_scale = rng.uniform(0.002, 0.02, units) if per_channel else np.array([0.01])
        w_zp = np.zeros(w_scale.size, np.int64)
    else:
        w = rng.integers(0, 256, (units, x_shape[-1])).astype(np.uint8)
        w_scale, w_zp = np.array([0.01]), np.array([131])
    in_scale, in_zp = 0.05, (3 if qtype == "int8" else 125)
    bias = rng.integers(-3000, 3000, units).astype(np.int32) if with_bias else None
    # about three standard deviations of the real output across the output's range
    out_scale = float(in_scale * w_scale.max() * 74 * 74 * np.sqrt(x_shape[-1]) * 3 / 128)
    quants = (
        Quant(in_scale, in_zp),
        Quant(w_scale, w_zp, 0),
        Quant(in_scale * w_scale, 0, 0),
        Quant(out_scale, -2 if qtype == "int8" else 129),
    )
    version = 6 if not with_bias else (5 if keep_num_dims else (4 if qtype == "int8" else 1))
    x = rng.integers(info.min, info.max + 1, x_shape).astype(dtype)
    out_shape = _fc_out_shape(x_shape, units, keep_num_dims)
    model = fc_model(
        x_shape,
        w,
        bias,
        out_shape,
        version,
        dtype,
        quants,
        keep_num_dims=keep_num_dims,
        fused_activation_function=act,
    )
    return model, x


QUANT_FC = list(
    itertools.product(
        (("int8", True), ("int8", False), ("uint8", False)),
        (False, True),
        (True, False),
        ("NONE", "RELU", "RELU6"),
    )
)


@pytest.mark.parametrize("qtype_pc,keep_num_dims,with_bias,act", QUANT_FC)
def test_fc_quantized(qtype_pc, keep_num_dims, with_bias, act):
    qtype, per_channel = qtype_pc
    rng = _rng("fc-q", qtype_pc, keep_num_dims, with_bias, act)
    model, x = _quant_fc_case(qtype, per_channel, keep_num_dims, with_bias, act, rng)
    assert_matches_litert(model, [x])


# -- hybrid FULLY_CONNECTED (float input, int8 weights) ---------------------------------------

HYBRID_FC = [(False, False, 3), (True, False, 9), (False, True, 12), (True, True, 12)]


@pytest.mark.parametrize("asymmetric,per_channel,version", HYBRID_FC)
@pytest.mark.parametrize("zero_row", (False, True))
def test_fc_hybrid(asymmetric, per_channel, version, zero_row):
    rng = _rng("fc-hybrid", asymmetric, per_channel, zero_row)
    w = rng.integers(-127, 128, (6, 20)).astype(np.int8)
    w_scale = rng.uniform(0.005, 0.02, 6) if per_channel else np.array([0.01])
    bias = rng.standard_normal(6).astype(np.float32)
    quants = (None, Quant(w_scale, 0, 0), None, None)
    model = fc_model(
        (3, 20), w, bias, (3, 6), version, np.float32, quants, asymmetric_quantize_inputs=asymmetric
    )
    x = rng.standard_normal((3, 20)).astype(np.float32)
    x[2] = np.abs(x[2])  # one row all positive: the zero point sits at the range's end
    if zero_row:
        x[1] = 0
    assert_matches_litert(model, [x])


# -- BATCH_MATMUL ----------------------------------------------------------------------------


def bmm_model(a_shape, b_shape, out_shape, dtype=np.float32, quants=None, version=1, **options):
    qa, qb, qo = quants or (None, None, None)
    b = ModelBuilder()
    g = b.main
    lhs = g.input("lhs", a_shape, dtype, quant=qa)
    rhs = g.input("rhs", b_shape, dtype, quant=qb)
    y = g.tensor("y", out_shape, dtype, quant=qo)
    g.op("BATCH_MATMUL", [lhs, rhs], [y], version=version, **options)
    g.output(y)
    return b.build()


def _bmm_shapes(batch_a, batch_b, adj_x, adj_y, m=3, k=5, n=4):
    a = (*batch_a, k, m) if adj_x else (*batch_a, m, k)
    b = (*batch_b, n, k) if adj_y else (*batch_b, k, n)
    out = (*np.broadcast_shapes(batch_a, batch_b), m, n)
    return a, b, out


BATCHES = (((), ()), ((2,), (2,)), ((2, 3), (1, 3)), ((4,), ()), ((1,), (2, 3)))
FLOAT_BMM = list(itertools.product(BATCHES, (False, True), (False, True)))


@pytest.mark.parametrize("batches,adj_x,adj_y", FLOAT_BMM)
def test_batch_matmul_float(batches, adj_x, adj_y):
    rng = _rng("bmm", batches, adj_x, adj_y)
    a_shape, b_shape, out_shape = _bmm_shapes(*batches, adj_x, adj_y)
    model = bmm_model(a_shape, b_shape, out_shape, adj_x=adj_x, adj_y=adj_y)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in (a_shape, b_shape)]
    assert_matches_litert(model, inputs)


@pytest.mark.parametrize(
    "batches,adj_x,adj_y", list(itertools.product(BATCHES[:3], (False, True), (False, True)))
)
def test_batch_matmul_int8(batches, adj_x, adj_y):
    rng = _rng("bmm-q", batches, adj_x, adj_y)
    a_shape, b_shape, out_shape = _bmm_shapes(*batches, adj_x, adj_y)
    quants = (
        Quant(0.05, -4),
        Quant(0.02, 0),
        Quant(0.05 * 0.02 * 74 * 74 * np.sqrt(5) * 3 / 128, 6),
    )
    model = bmm_model(a_shape, b_shape, out_shape, np.int8, quants, 2, adj_x=adj_x, adj_y=adj_y)
    inputs = [rng.integers(-128, 128, s).astype(np.int8) for s in (a_shape, b_shape)]
    assert_matches_litert(model, inputs)


# -- errors ----------------------------------------------------------------------------------


def test_fc_int16_is_model_error():
    q = Quant(0.1, 0)
    w = np.ones((3, 4), np.int8)
    model = fc_model((2, 4), w, None, (2, 3), 6, np.int16, (q, q, None, q))
    with pytest.raises(ModelError, match="FULLY_CONNECTED"):
        Interpreter(read_model(model)).invoke([np.zeros((2, 4), np.int16)])


@pytest.mark.parametrize("act", ("TANH", "SIGN_BIT"))
def test_fc_unclamped_activation_is_model_error(act):
    w = np.ones((3, 4), np.float32)
    model = fc_model((2, 4), w, None, (2, 3), 6, fused_activation_function=act)
    with pytest.raises(ModelError, match="FULLY_CONNECTED.*fused activation"):
        Interpreter(read_model(model)).invoke([np.zeros((2, 4), np.float32)])


def test_fc_int16_version_is_model_error():
    q = Quant(0.1, 0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2, 4), np.int16, quant=q)
    w = g.const("w", np.ones((3, 4), np.int16), quant=q)
    y = g.tensor("y", (2, 3), np.int16, quant=q)
    g.op("FULLY_CONNECTED", [x, w], [y], version=7)
    g.output(y)
    with pytest.raises(ModelError, match="FULLY_CONNECTED version 7"):
        Interpreter(read_model(b.build()))


def test_batch_matmul_mismatch_is_model_error():
    model = bmm_model((2, 3), (4, 5), (2, 5))
    with pytest.raises(ModelError, match="BATCH_MATMUL"):
        Interpreter(read_model(model)).invoke(
            [np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)]
        )
