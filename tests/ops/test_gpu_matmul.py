"""BATCH_MATMUL and ADD_N on the GPU delegate in fp32 and fp16, against LiteRT's reference
kernels; their support checks against LiteRT's refusals.

BATCH_MATMUL runs `batch_matmul4d` (any operands, adjoints, broadcast batch axes) or,
where the right operand is a constant matrix and the left one is read as stored, the
tiled GEMM; each case names the kernel that must run it. A product reading one tensor
twice (x @ x^T, attention scores, Gram matrices), on which LiteRT's GPU delegate fails
(`Check failed: !IsInput(consumer, value)`), is taken and right here. Each model must be
delegated whole.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.support import TYPE_SHAPE, supports
from tests.ops.conftest import run_litert
from tests.ops.oneop import Const, In, one_op
from tests.ops.test_gpu_beyond_vision import uniform
from tests.ops.test_gpu_ops import (  # noqa: F401  (opencl_device: the fixture)
    PRECISIONS,
    TOL,
    assert_close,
    opencl_device,
)
from tests.ops.test_gpu_reductions import node, run_session

F = np.float32


def check(model: bytes, xs: list[np.ndarray], precision: str, kernel: str, **kw) -> None:
    """Within the precision's tolerance of LiteRT's reference kernels, run by a kernel
    whose name starts with `kernel`; `kw`: GpuSession's options."""
    want = run_litert(model, xs)
    got, kernels = run_session(model, xs, precision, **kw)
    assert any(k.startswith(kernel) for k in kernels), f"no {kernel}*: {sorted(kernels)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, TOL[precision], f"output {i}")


def bmm_shapes(batch_x: tuple, batch_y: tuple, adj_x: bool, adj_y: bool, m=3, k=5, n=4):
    """The operands' and the output's shapes of [.., m, k] x [.., k, n]."""
    x = (*batch_x, k, m) if adj_x else (*batch_x, m, k)
    y = (*batch_y, n, k) if adj_y else (*batch_y, k, n)
    return x, y, (*np.broadcast_shapes(batch_x, batch_y), m, n)


# -- BATCH_MATMUL, runtime operands ---------------------------------------------------------------

#: id -> (x's batch axes, y's batch axes), broadcast as TFLite broadcasts them
BATCHES = {
    "matrices": ((), ()),
    "batch2": ((2,), (2,)),
    "broadcast-y-b0": ((2, 3), (1, 3)),
    "y-matrix": ((4,), ()),
    "x-broadcast-both": ((1,), (2, 3)),
}
ADJOINTS = {
    "plain": (False, False),
    "adj_x": (True, False),
    "adj_y": (False, True),
    "both": (True, True),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("adj", ADJOINTS)
@pytest.mark.parametrize("batches", BATCHES)
def test_batch_matmul(batches: str, adj: str, precision: str) -> None:
    adj_x, adj_y = ADJOINTS[adj]
    xs, ys, out = bmm_shapes(*BATCHES[batches], adj_x, adj_y)
    x, y = uniform(f"x-{batches}-{adj}", -2, 2, xs), uniform(f"y-{batches}-{adj}", -2, 2, ys)
    model, feeds = one_op("BATCH_MATMUL", [In(x), In(y)], [(out, F)], adj_x=adj_x, adj_y=adj_y)
    check(model, feeds, precision, "batch_matmul4d")


# -- one operand constant ---------------------------------------------------------------------------

#: id -> (x's shape, y's shape, which is constant, adj_x, adj_y, kernel)
CONSTANT = {
    "y-matrix": ((2, 5, 8), (8, 6), "y", False, False, "gemm"),
    "y-matrix-adj_y": ((2, 5, 8), (6, 8), "y", False, True, "gemm"),
    "y-matrix-large": ((1, 64, 96), (96, 80), "y", False, False, "gemm"),
    "y-matrix-batch1-4d": ((2, 3, 4, 8), (1, 1, 8, 6), "y", False, False, "gemm"),
    "y-matrix-adj_x": ((2, 8, 5), (8, 6), "y", True, False, "batch_matmul4d"),
    "y-batched": ((2, 5, 8), (2, 8, 6), "y", False, False, "batch_matmul4d"),
    "x-matrix": ((5, 8), (3, 8, 6), "x", False, False, "batch_matmul4d"),
    "x-matrix-adj_y": ((5, 8), (3, 6, 8), "x", False, True, "batch_matmul4d"),
}


def out_shape(xs: tuple, ys: tuple, adj_x: bool, adj_y: bool) -> tuple:
    m = xs[-1] if adj_x else xs[-2]
    n = ys[-2] if adj_y else ys[-1]
    return (*np.broadcast_shapes(xs[:-2], ys[:-2]), m, n)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", CONSTANT)
def test_batch_matmul_with_a_constant_operand(case: str, precision: str) -> None:
    xs, ys, constant, adj_x, adj_y, kernel = CONSTANT[case]
    x, y = uniform(f"cx-{case}", -1, 1, xs), uniform(f"cy-{case}", -1, 1, ys)
    args = [Const(x, F) if constant == "x" else In(x), Const(y, F) if constant == "y" else In(y)]
    out = out_shape(xs, ys, adj_x, adj_y)
    model, feeds = one_op("BATCH_MATMUL", args, [(out, F)], adj_x=adj_x, adj_y=adj_y)
    check(model, feeds, precision, kernel)


# -- one tensor read twice ----------------------------------------------------------------------------


def self_product_model(shape: tuple, adj_x: bool, adj_y: bool) -> bytes:
    """BATCH_MATMUL(x, x): both operands the one runtime tensor."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    y = g.tensor("y", out_shape(shape, shape, adj_x, adj_y), F)
    g.op("BATCH_MATMUL", [x, x], [y], adj_x=adj_x, adj_y=adj_y)
    g.output(y)
    return b.build()


#: id -> (x's shape, adj_x, adj_y)
SELF = {
    "x-xT-attention-scores": ((2, 6, 8), False, True),
    "xT-x-gram": ((2, 6, 8), True, False),
    "x-squared": ((3, 5, 5), False, False),
    "xT-xT-matrix": ((7, 7), True, True),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", SELF)
def test_batch_matmul_reading_one_tensor_twice(case: str, precision: str) -> None:
    shape, adj_x, adj_y = SELF[case]
    x = uniform(f"self-{case}", -1, 1, shape)
    check(self_product_model(shape, adj_x, adj_y), [x], precision, "batch_matmul4d")


# -- int8 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("adj", ADJOINTS)
@pytest.mark.parametrize("batches", ["matrices", "batch2", "broadcast-y-b0"])
def test_int8_batch_matmul_within_a_step(batches: str, adj: str) -> None:
    """v2, int8: the float view (operands dequantized, the product snapped to the output's
    grid) within one step of LiteRT's integer kernel."""
    adj_x, adj_y = ADJOINTS[adj]
    xs, ys, out = bmm_shapes(*BATCHES[batches], adj_x, adj_y)
    rng = np.random.default_rng(len(batches) * 4 + len(adj))
    x, y = (rng.integers(-128, 128, s).astype(np.int8) for s in (xs, ys))
    model, feeds = one_op(
        "BATCH_MATMUL",
        [In(x, Quant(0.05, -4)), In(y, Quant(0.02, 0))],
        [(out, np.int8, Quant(0.2, 6))],
        version=2,
        adj_x=adj_x,
        adj_y=adj_y,
    )
    want = run_litert(model, feeds)[0]
    got, _ = run_session(model, feeds, "fp32")
    assert got[0].dtype == np.int8 and got[0].shape == want.shape
    steps = np.abs(got[0].astype(np.int32) - want.astype(np.int32))
    assert steps.max() <= 1, f"{steps.max()} steps off"


def test_hybrid_batch_matmul_is_taken_as_litert_takes_it() -> None:
    """v4 (float x, int8 constant y, asymmetric_quantize_inputs): LiteRT's parser takes it
    (its weights dequantized), and so does the check here; our reference interpreter has no
    kernel for v4, so the runtime refuses such a model before any delegate sees it."""
    x = np.zeros((2, 5, 8), F)
    y = np.ones((8, 6), np.int8)
    model = one_op(
        "BATCH_MATMUL",
        [In(x), Const(y, np.int8, Quant(0.01, 0))],
        [((2, 5, 6), F)],
        version=4,
        asymmetric_quantize_inputs=True,
    )[0]
    assert supports(*node(model)) == (True, "")


# -- ADD_N ------------------------------------------------------------------------------------------

#: id -> (the inputs' shape, how many, which of them are constant)
ADD_N = {
    "two": ((1, 4, 5, 6), 2, ()),
    "three": ((1, 4, 5, 6), 3, ()),
    "four-one-constant": ((2, 3, 7), 4, (2,)),
    "two-one-constant-rank1": ((9,), 2, (0,)),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("case", ADD_N)
def test_add_n(case: str, precision: str) -> None:
    """Two inputs as LiteRT takes them; more, which it refuses, taken here."""
    shape, count, constants = ADD_N[case]
    xs = [uniform(f"addn-{case}-{i}", -2, 2, shape) for i in range(count)]
    args = [Const(x, F) if i in constants else In(x) for i, x in enumerate(xs)]
    model, feeds = one_op("ADD_N", args, [(shape, F)])
    check(model, feeds, precision, "binary4d")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_add_n_reading_one_tensor_three_times(precision: str) -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 5, 6), F)
    y = g.tensor("y", (1, 4, 5, 6), F)
    g.op("ADD_N", [x, x, x], [y])
    g.output(y)
    check(b.build(), [uniform("addn-self", -2, 2)], precision, "binary4d")


# -- the kernels as a GPU runs them ---------------------------------------------------------------


def chain_model() -> bytes:
    """Attention-like scores x @ x^T, their CUMSUM along a row, the SUM of all of them
    (a wide reduction), and ADD_N(scores @ x, x, x)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 32, 16), F)
    scores = g.tensor("scores", (1, 32, 32), F)
    g.op("BATCH_MATMUL", [x, x], [scores], adj_y=True)
    running = g.tensor("running", (1, 32, 32), F)
    g.op("CUMSUM", [scores, g.const("axis", np.array(2, np.int32))], [running])
    total = g.tensor("total", (1,), F)
    g.op("SUM", [running, g.const("axes", np.array([1, 2], np.int32))], [total])
    mixed = g.tensor("mixed", (1, 32, 16), F)
    g.op("BATCH_MATMUL", [scores, x], [mixed])
    y = g.tensor("y", (1, 32, 16), F)
    g.op("ADD_N", [mixed, x, x], [y])
    g.output(total, y)
    return b.build()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_the_kernels_as_specialized_copies(precision: str) -> None:
    """With specialization on (as on a GPU: each kernel a copy reading its buffers from
    the partition's arena), the model's outputs are LiteRT's."""
    x = uniform("chain", -0.5, 0.5, (1, 32, 16))
    check(chain_model(), [x], precision, "reduce4d_wide", specialize=True)


# -- what LiteRT refuses ----------------------------------------------------------------------------


def test_batch_matmul_with_three_inputs_is_refused_as_litert() -> None:
    x = np.zeros((2, 3), F)
    model = one_op("BATCH_MATMUL", [In(x), In(x.T.copy()), In(x)], [((2, 2), F)])[0]
    assert supports(*node(model)) == (
        False,
        "Expected 2 inputs and 1 output, got: 3 inputs and 1 outputs",
    )


#: id -> (x, y, output, version): refused by the common type and rank rules, as in LiteRT
BMM_BY_TYPE = {
    "rank5": ((1, 2, 2, 3, 4), (1, 2, 2, 4, 5), (1, 2, 2, 3, 5), np.float32, 1),
    "int16-v3": ((2, 3, 4), (2, 4, 5), (2, 3, 5), np.int16, 3),
}


@pytest.mark.parametrize("case", BMM_BY_TYPE)
def test_batch_matmul_refused_by_type_or_rank(case: str) -> None:
    xs, ys, out, dtype, version = BMM_BY_TYPE[case]
    q = Quant(0.01, 0) if dtype == np.int16 else None
    x, y = np.zeros(xs, dtype), np.zeros(ys, dtype)
    model = one_op(
        "BATCH_MATMUL", [In(x, q), In(y, q)], [(out, dtype, q) if q else (out, dtype)], version
    )[0]
    assert supports(*node(model)) == (False, TYPE_SHAPE)


X = np.zeros((1, 4, 5, 6), F)
#: id -> (model, LiteRT's reason)
ADD_N_REFUSALS = {
    "int32-inputs": (
        lambda: one_op("ADD_N", [In(X.astype(np.int32))] * 2, [(X.shape, np.int32)])[0],
        TYPE_SHAPE,
    ),
    "version-3": (
        lambda: one_op("ADD_N", [In(X), In(X)], [(X.shape, F)], version=3)[0],
        "Max version supported: 2. Requested version 3.",
    ),
}


@pytest.mark.parametrize("case", ADD_N_REFUSALS)
def test_add_n_refuses_as_litert(case: str) -> None:
    make, why = ADD_N_REFUSALS[case]
    assert supports(*node(make())) == (False, why)


def test_add_n_of_different_shapes_is_refused() -> None:
    """TFLite's kernel requires one shape (LiteRT's delegate checks nothing)."""
    model = one_op("ADD_N", [In(X), In(X[..., :1].copy())], [(X.shape, F)])[0]
    ok, why = supports(*node(model))
    assert not ok and why.startswith("ADD_N's inputs must have one shape")


def test_chain_is_delegated_whole_without_specialization() -> None:
    """The same chain on the shared program's kernels (PoCL's default)."""
    x = uniform("chain-plain", -0.5, 0.5, (1, 32, 16))
    check(chain_model(), [x], "fp32", "batch_matmul4d")
