"""DENSIFY against LiteRT's reference kernels, bit for bit, on sparse constants the builder
writes (each value type x storage layout its own case); sparse weights feeding a
convolution on the CPU reference and through the GPU delegate; the op's refusals."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.sparsity import DENSE, SPARSE_CSR, sparsify
from tests.conftest import require
from tests.ops.conftest import assert_matches_litert, run_litert, run_ours

D, S = DENSE, SPARSE_CSR

#: (shape, formats, traversal order, block map, block size, index type)
LAYOUTS = [
    ((4, 6), [D, S], None, (), (), np.int32),
    ((4, 6), [S, S], [1, 0], (), (), np.uint8),
    ((4, 6), [D, S, D, D], None, (0, 1), (2, 3), np.uint16),
    ((16, 8), [D, S, D], None, (1,), (4,), np.uint8),
    ((8, 1, 1, 32), [D, D, D, S], None, (), (), np.uint8),
    ((3, 4, 5), [S, D, S], [2, 0, 1], (), (), np.int32),
    ((2, 3, 4, 4), [D, S, D, S, D], [0, 3, 1, 2, 4], (3,), (2,), np.uint16),
]
LAYOUT_IDS = [f"{c[0]}-{''.join(f[0] for f in c[1])}-{c[2]}-{c[3]}" for c in LAYOUTS]
VALUE_TYPES = [np.float32, np.float16, np.int8]


def sparse_weights(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    keep = rng.random(shape) < 0.35
    if np.dtype(dtype).kind == "i":
        return (rng.integers(-128, 128, shape) * keep).astype(dtype)
    return (rng.standard_normal(shape) * keep).astype(dtype)


def densify_model(dense: np.ndarray, layout: tuple, quant: Quant | None = None) -> bytes:
    _, formats, order, block_map, block_size, index_type = layout
    values, sp = sparsify(dense, formats, order, block_map, block_size, index_type)
    b = ModelBuilder()
    g = b.main
    w = g.sparse_const("w_sparse", dense.shape, values, sp, quant=quant)
    y = g.tensor("w", dense.shape, dense.dtype, quant=quant)
    g.op("DENSIFY", [w], [y])
    g.output(y)
    return b.build()


@pytest.mark.parametrize("dtype", VALUE_TYPES, ids=[np.dtype(t).name for t in VALUE_TYPES])
@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
def test_densify_bit_exact(layout: tuple, dtype: type) -> None:
    dense = sparse_weights(layout[0], dtype)
    quant = Quant(0.02, 3) if dtype == np.int8 else None
    model = densify_model(dense, layout, quant)
    (expected,) = run_litert(model, [])
    (got,) = run_ours(model, [])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))
    np.testing.assert_array_equal(got, dense)


# -- sparse weights in a network ----------------------------------------------------------


def sparse_conv_model(weight_type: type, seed: int = 1) -> tuple[bytes, list[np.ndarray]]:
    """x (1, 6, 6, 16) -> CONV_2D with 3x3 sparse weights (through DEQUANTIZE for fp16)."""
    rng = np.random.default_rng(seed)
    w = sparse_weights((8, 3, 3, 16), weight_type, seed)
    values, sp = sparsify(w, [D, D, D, S], index_type=np.uint16)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 6, 6, 16))
    ws = g.sparse_const("w_sparse", w.shape, values, sp)
    wd = g.tensor("w_dense", w.shape, weight_type)
    g.op("DENSIFY", [ws], [wd])
    if weight_type == np.float16:
        wf = g.tensor("w", w.shape, np.float32)
        g.op("DEQUANTIZE", [wd], [wf])
        wd = wf
    bias = g.const("bias", rng.standard_normal(8).astype(np.float32))
    y = g.tensor("y", (1, 6, 6, 8))
    g.op("CONV_2D", [x, wd, bias], [y], padding="SAME", stride_h=1, stride_w=1)
    g.output(y)
    return b.build(), [rng.standard_normal((1, 6, 6, 16)).astype(np.float32)]


@pytest.mark.parametrize("weight_type", [np.float32, np.float16], ids=["fp32", "fp16"])
def test_sparse_conv_cpu(weight_type: type) -> None:
    model, xs = sparse_conv_model(weight_type)
    assert_matches_litert(model, xs)


@pytest.fixture(scope="module")
def opencl_device() -> str:
    """An OpenCL device (skip locally, fail in CI without one)."""
    require(_has_opencl(), "an OpenCL device (a GPU driver or PoCL)")
    return "ok"


def _has_opencl() -> bool:
    try:
        from delegate_runtime.gpu.opencl.runtime import list_devices
    except ImportError:
        return False
    return bool(list_devices())


@pytest.mark.parametrize("weight_type", [np.float32, np.float16], ids=["fp32", "fp16"])
def test_sparse_conv_gpu_fully_delegated(opencl_device: str, weight_type: type) -> None:
    """DENSIFY (and DEQUANTIZE) fold at preparation: the delegate takes every node."""
    from delegate_runtime.gpu.delegate import GpuSession

    model, xs = sparse_conv_model(weight_type)
    parsed = read_model(model)
    session = GpuSession(parsed, precision="fp32", log=io.StringIO())
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes == 1, d.to_dict()
    want = Interpreter(parsed).invoke(xs)[0]
    got = session.invoke(xs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


# -- refusals -----------------------------------------------------------------------------


def test_densify_of_a_dense_constant_is_a_model_error() -> None:
    """LiteRT refuses it at preparation; so do we, naming the tensor."""
    b = ModelBuilder()
    g = b.main
    w = g.const("w_plain", np.ones((2, 3), np.float32))
    y = g.tensor("y", (2, 3))
    g.op("DENSIFY", [w], [y])
    g.output(y)
    with pytest.raises(ModelError, match="'w_plain' must be a sparse constant"):
        run_ours(b.build(), [])


def test_densify_of_int32_is_a_model_error() -> None:
    """LiteRT's DENSIFY handles float32, float16 and int8 only."""
    dense = np.eye(4, dtype=np.int32)
    model = densify_model(dense, ((4, 4), [D, S], None, (), (), np.int32))
    with pytest.raises(ModelError, match="int32 tensors are not supported"):
        run_ours(model, [])
