"""GPU delegate (OpenCL) against the numpy reference: every lowered op, fp32 and fp16.

Each case is a one-op model (a few quantized models chain QUANTIZE -> op -> DEQUANTIZE);
it must be delegated whole and match `Interpreter` within the precision's tolerance.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.graph import Model
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require, require_module
from tests.switched import switched

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

PRECISIONS = ("fp32", "fp16")
#: Relative-to-magnitude tolerance per storage precision.
TOL = {"fp32": 1e-4, "fp16": 2e-2}
ACTS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGMOID")
#: Fused activations LiteRT's CPU kernels ignore (or refuse) but the GPU delegate applies
#: (its MaybeFuseActivation): checked as the function applied to the reference without it.
#: SIGMOID has no schema name; the delegate reads code 6 (kTfLiteActSigmoid).
APPLIED_ON_GPU = {
    "TANH": np.tanh,
    "SIGMOID": lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype),
}
ACT_CODES = {"SIGMOID": 6}


@pytest.fixture(scope="session")
def opencl_device() -> str:
    """The OpenCL device the delegate will pick (skip locally, fail in CI without one)."""
    from delegate_runtime.gpu.opencl.runtime import describe, list_devices

    devices = list_devices()
    require(bool(devices), "an OpenCL device (a GPU driver or PoCL)")
    return describe(devices[0][2]).name


# -- model building --------------------------------------------------------------------------


@dataclass(frozen=True)
class In:
    """A runtime input of the case's model."""

    shape: tuple[int, ...]
    dtype: type = np.float32
    quant: Quant | None = None
    low: float = -2.0
    high: float = 2.0


@dataclass
class Case:
    """One op, its operands (`In` or constant arrays) and options."""

    op: str
    operands: list
    options: dict = field(default_factory=dict)
    version: int = 1
    out_dtype: type = np.float32
    out_quant: Quant | None = None
    out_shape: tuple[int, ...] | None = None  #: None: what the reference produces

    def build(self, out_shape: tuple[int, ...]) -> bytes:
        b = ModelBuilder()
        g = b.main
        ids = []
        for i, operand in enumerate(self.operands):
            if operand is None:
                ids.append(-1)
            elif isinstance(operand, In):
                ids.append(g.input(f"in{i}", operand.shape, operand.dtype, quant=operand.quant))
            else:
                ids.append(g.const(f"c{i}", operand))
        y = g.tensor("y", out_shape, self.out_dtype, quant=self.out_quant)
        options = dict(self.options)
        act = options.get("fused_activation_function")
        options.update({"fused_activation_function": ACT_CODES[act]} if act in ACT_CODES else {})
        g.op(self.op, ids, [y], version=self.version, **options)
        g.output(y)
        return b.build()

    def without_activation(self) -> Case:
        if "fused_activation_function" not in self.options:
            return self
        return replace(self, options={**self.options, "fused_activation_function": "NONE"})

    def inputs(self, seed: int) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        return [_random(rng, o) for o in self.operands if isinstance(o, In)]

    def model(self, seed: int) -> tuple[Model, list[np.ndarray]]:
        """The model with its true output shape (from a reference run) and its inputs."""
        xs = self.inputs(seed)
        shape = self.out_shape
        if shape is None:
            probe = read_model(self.without_activation().build((1,)))
            shape = Interpreter(probe).invoke(xs)[0].shape
        return read_model(self.build(tuple(shape))), xs


def _random(rng: np.random.Generator, spec: In) -> np.ndarray:
    if spec.dtype == np.bool_:
        return rng.random(spec.shape) > 0.5
    if np.dtype(spec.dtype).kind in "iu":
        info = np.iinfo(spec.dtype)
        return rng.integers(int(info.min), int(info.max) + 1, spec.shape).astype(spec.dtype)
    return rng.uniform(spec.low, spec.high, spec.shape).astype(spec.dtype)


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def randn(key: str, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng_for(key, shape).standard_normal(shape) * scale).astype(np.float32)


def run_gpu(model: Model, xs: Sequence[np.ndarray], precision: str, **kw) -> list[np.ndarray]:
    """Run through the delegate, asserting that every node was delegated."""
    from delegate_runtime.gpu.delegate import GpuSession

    log = io.StringIO()
    session = GpuSession(model, precision=precision, log=log, **kw)
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, f"not fully delegated: {d.to_dict()}"
    return session.invoke(list(xs))


def assert_close(got: np.ndarray, want: np.ndarray, tol: float, what: str = "") -> None:
    assert got.shape == want.shape, f"{what} shape {got.shape} != reference {want.shape}"
    assert got.dtype == want.dtype, f"{what} dtype {got.dtype} != reference {want.dtype}"
    scale = max(float(np.abs(want.astype(np.float64)).max(initial=0)), 1.0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


def reference(case: Case, model: Model, xs: list[np.ndarray]) -> list[np.ndarray]:
    """The reference outputs, with the GPU's view of TANH and SIGMOID fused activations."""
    act = case.options.get("fused_activation_function", "NONE")
    if act not in APPLIED_ON_GPU:
        return Interpreter(model).invoke(xs)
    plain, _ = case.without_activation().model(0)
    return [APPLIED_ON_GPU[act](y) for y in Interpreter(plain).invoke(xs)]


def check(case: Case, precision: str, seed: int = 0, **kw) -> None:
    model, xs = case.model(seed)
    want = reference(case, model, xs)
    got = run_gpu(model, xs, precision, **kw)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, TOL[precision], f"output {i}")


def params(cases: dict[str, Callable[[], Case]]) -> list:
    """pytest params over cases x precisions, with readable ids."""
    return [
        pytest.param(make, p, id=f"{name}-{p}") for name, make in cases.items() for p in PRECISIONS
    ]


# -- convolution -----------------------------------------------------------------------------


def conv(
    hw=(9, 8),
    cin=3,
    cout=5,
    k=(3, 3),
    stride=(1, 1),
    dilation=(1, 1),
    padding="SAME",
    act="NONE",
    bias=True,
    batch=1,
) -> Case:
    key = f"conv{hw}{cin}{cout}{k}"
    w = randn(key + "w", cout, *k, cin, scale=1 / np.sqrt(cin * k[0] * k[1]))
    return Case(
        "CONV_2D",
        [In((batch, *hw, cin)), w, randn(key + "b", cout) if bias else None],
        dict(
            padding=padding,
            stride_h=stride[0],
            stride_w=stride[1],
            dilation_h_factor=dilation[0],
            dilation_w_factor=dilation[1],
            fused_activation_function=act,
        ),
    )


CONV_CASES = {
    "3x3-same": lambda: conv(),
    "3x3-valid": lambda: conv(padding="VALID"),
    "3x3-stride2-same": lambda: conv(stride=(2, 2)),
    "3x3-stride2-valid": lambda: conv(stride=(2, 2), padding="VALID"),
    "3x3-stride-2x1": lambda: conv(stride=(2, 1)),
    "3x3-dilated2-same": lambda: conv(dilation=(2, 2)),
    "3x3-dilated-2x3-valid": lambda: conv(hw=(11, 12), dilation=(2, 3), padding="VALID"),
    "5x3-no-bias-batch2": lambda: conv(k=(5, 3), bias=False, batch=2),
    "1x1-stride2-direct": lambda: conv(k=(1, 1), stride=(2, 2)),
    **{f"3x3-act-{a}": (lambda a=a: conv(act=a)) for a in ACTS},
    # 1x1 stride 1: the GEMM path (gemm32 for small outputs, gemm64 for large, split K)
    "1x1-gemm": lambda: conv(k=(1, 1), cin=16, cout=24),
    "1x1-gemm-ragged": lambda: conv(hw=(7, 5), k=(1, 1), cin=13, cout=7, batch=2),
    "1x1-gemm64": lambda: conv(hw=(16, 16), k=(1, 1), cin=32, cout=128),
    "1x1-gemm-splitk": lambda: conv(hw=(4, 4), k=(1, 1), cin=256, cout=8),
    "1x1-gemm-splitk-ragged": lambda: conv(hw=(3, 3), k=(1, 1), cin=200, cout=10),
    **{f"1x1-gemm-act-{a}": (lambda a=a: conv(k=(1, 1), cin=8, cout=6, act=a)) for a in ACTS},
}


@pytest.mark.parametrize("make,precision", params(CONV_CASES))
def test_conv2d(opencl_device, make, precision):
    check(make(), precision)


def depthwise(
    hw=(9, 8),
    c=8,
    mult=1,
    k=(3, 3),
    stride=(1, 1),
    dilation=(1, 1),
    padding="SAME",
    act="NONE",
    bias=True,
    batch=1,
) -> Case:
    key = f"dw{hw}{c}{mult}{k}"
    oc = c * mult
    return Case(
        "DEPTHWISE_CONV_2D",
        [In((batch, *hw, c)), randn(key + "w", 1, *k, oc), randn(key + "b", oc) if bias else None],
        dict(
            padding=padding,
            stride_h=stride[0],
            stride_w=stride[1],
            dilation_h_factor=dilation[0],
            dilation_w_factor=dilation[1],
            depth_multiplier=mult,
            fused_activation_function=act,
        ),
        version=2 if dilation != (1, 1) else 1,
    )


DEPTHWISE_CASES = {
    # 3x3, multiplier 1, channels % 4 == 0: the c4 fast path
    "c4-same": lambda: depthwise(),
    "c4-valid": lambda: depthwise(padding="VALID"),
    "c4-stride2": lambda: depthwise(stride=(2, 2)),
    "c4-stride2-valid-batch2": lambda: depthwise(stride=(2, 2), padding="VALID", batch=2),
    "c4-no-bias": lambda: depthwise(bias=False),
    "c4-ragged-width": lambda: depthwise(hw=(5, 7)),
    "c4-stride2-ragged-width": lambda: depthwise(hw=(6, 11), stride=(2, 2), c=12),
    "c4-stride-1x2": lambda: depthwise(hw=(6, 9), stride=(1, 2)),
    "c4-stride3": lambda: depthwise(hw=(10, 10), stride=(3, 3)),
    **{f"c4-act-{a}": (lambda a=a: depthwise(act=a)) for a in ACTS},
    # generic kernel
    "c3-generic": lambda: depthwise(c=3),
    "multiplier2": lambda: depthwise(c=3, mult=2),
    "multiplier4-stride2": lambda: depthwise(c=2, mult=4, stride=(2, 2)),
    "5x5-valid": lambda: depthwise(k=(5, 5), padding="VALID"),
    "dilated2": lambda: depthwise(dilation=(2, 2)),
    "dilated2-valid-c3": lambda: depthwise(c=3, hw=(11, 10), dilation=(2, 2), padding="VALID"),
    "generic-act-RELU6": lambda: depthwise(c=5, act="RELU6"),
}


@pytest.mark.parametrize("make,precision", params(DEPTHWISE_CASES))
def test_depthwise_conv2d(opencl_device, make, precision):
    check(make(), precision)


def fully_connected(x_shape, n, act="NONE", bias=True, keep_num_dims=False) -> Case:
    k = x_shape[-1]
    key = f"fc{x_shape}{n}"
    return Case(
        "FULLY_CONNECTED",
        [
            In(x_shape),
            randn(key + "w", n, k, scale=1 / np.sqrt(k)),
            randn(key + "b", n) if bias else None,
        ],
        dict(fused_activation_function=act, keep_num_dims=keep_num_dims),
    )


FC_CASES = {
    "2d": lambda: fully_connected((3, 20), 10),
    "2d-no-bias": lambda: fully_connected((2, 16), 5, bias=False),
    "batch1-splitk": lambda: fully_connected((1, 512), 10),
    "4d-flattened": lambda: fully_connected((1, 2, 2, 6), 7),
    "keep-num-dims-3d": lambda: fully_connected((2, 3, 12), 5, keep_num_dims=True),
    "keep-num-dims-4d": lambda: fully_connected((1, 2, 3, 8), 4, keep_num_dims=True),
    **{f"act-{a}": (lambda a=a: fully_connected((4, 9), 6, act=a)) for a in ACTS},
}


@pytest.mark.parametrize("make,precision", params(FC_CASES))
def test_fully_connected(opencl_device, make, precision):
    check(make(), precision)


def transpose_conv(hw, cin, cout, k, stride, padding, bias=True, act=None, batch=1) -> Case:
    key = f"tc{hw}{cin}{cout}{k}"
    if padding == "SAME":
        out_hw = (hw[0] * stride, hw[1] * stride)
    else:
        out_hw = tuple((i - 1) * stride + kk for i, kk in zip(hw, k, strict=True))
    out_shape = (batch, *out_hw, cout)
    operands = [
        np.array(out_shape, np.int32),
        randn(key + "w", cout, *k, cin),
        In((batch, *hw, cin)),
    ]
    version = 1
    if bias:
        operands.append(randn(key + "b", cout))
        version = 3
    options = dict(padding=padding, stride_h=stride, stride_w=stride)
    if act:
        options["fused_activation_function"] = act
        version = 4
    return Case("TRANSPOSE_CONV", operands, options, version=version, out_shape=out_shape)


TRANSPOSE_CONV_CASES = {
    "3x3-stride2-same": lambda: transpose_conv((4, 5), 3, 4, (3, 3), 2, "SAME"),
    "3x3-stride2-valid": lambda: transpose_conv((4, 5), 3, 4, (3, 3), 2, "VALID"),
    "2x2-stride2-same-no-bias": lambda: transpose_conv((3, 3), 4, 2, (2, 2), 2, "SAME", False),
    "3x3-stride1-same": lambda: transpose_conv((5, 4), 2, 3, (3, 3), 1, "SAME"),
    "4x4-stride3-valid": lambda: transpose_conv((3, 2), 2, 3, (4, 4), 3, "VALID"),
    "3x3-stride2-batch2": lambda: transpose_conv((3, 4), 3, 2, (3, 3), 2, "SAME", batch=2),
}


@pytest.mark.parametrize("make,precision", params(TRANSPOSE_CONV_CASES))
def test_transpose_conv(opencl_device, make, precision):
    check(make(), precision)


# -- pooling, reductions, softmax ------------------------------------------------------------


def pool(op, k=(3, 3), stride=(2, 2), padding="SAME", act="NONE", shape=(2, 9, 8, 5)) -> Case:
    return Case(
        op,
        [In(shape)],
        dict(
            padding=padding,
            filter_height=k[0],
            filter_width=k[1],
            stride_h=stride[0],
            stride_w=stride[1],
            fused_activation_function=act,
        ),
    )


POOL_CASES = {
    f"{op.split('_')[0].lower()}-{name}": (lambda op=op, kw=kw: pool(op, **kw))
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D")
    for name, kw in {
        "3x3-s2-same": {},
        "3x3-s2-valid": dict(padding="VALID"),
        "2x2-s2-valid": dict(k=(2, 2), padding="VALID"),
        "3x2-s1-same": dict(k=(3, 2), stride=(1, 1)),
        "global": dict(k=(9, 8), stride=(1, 1), padding="VALID"),
        "relu6": dict(act="RELU6"),
    }.items()
}


@pytest.mark.parametrize("make,precision", params(POOL_CASES))
def test_pool2d(opencl_device, make, precision):
    check(make(), precision)


def mean(shape, axes, keep) -> Case:
    return Case("MEAN", [In(shape), np.array(axes, np.int32)], dict(keep_dims=keep))


MEAN_CASES = {
    "hw-keep": lambda: mean((2, 5, 6, 4), [1, 2], True),
    "hw-drop": lambda: mean((1, 7, 7, 8), [1, 2], False),
    "last-axis": lambda: mean((3, 4, 10), [2], False),
    "negative-axis": lambda: mean((2, 3, 4, 5), [-1], True),
    "first-axes": lambda: mean((4, 3, 5), [0, 1], False),
}


@pytest.mark.parametrize("make,precision", params(MEAN_CASES))
def test_mean(opencl_device, make, precision):
    check(make(), precision)


SOFTMAX_CASES = {
    "2d": lambda: Case("SOFTMAX", [In((3, 10), low=-5, high=5)], dict(beta=1.0)),
    "4d-channels": lambda: Case("SOFTMAX", [In((1, 4, 5, 6), low=-5, high=5)], dict(beta=1.0)),
    "wide-row": lambda: Case("SOFTMAX", [In((2, 1001), low=-8, high=8)], dict(beta=1.0)),
    "one-column": lambda: Case("SOFTMAX", [In((5, 1))], dict(beta=1.0)),
}


@pytest.mark.parametrize("make,precision", params(SOFTMAX_CASES))
def test_softmax(opencl_device, make, precision):
    check(make(), precision)


# -- element-wise ----------------------------------------------------------------------------

BINARY_OPS = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
#: Broadcasting patterns the delegate accepts (runtime x runtime, and with constants).
BROADCASTS = {
    "same": ((2, 4, 5, 3), (2, 4, 5, 3)),
    "4d-3d": ((1, 4, 5, 3), (4, 5, 3)),
    "3d-4d": ((4, 5, 3), (1, 4, 5, 3)),
    "4d-1x1": ((2, 4, 5, 3), (1, 1)),
    "4d-1": ((2, 4, 5, 3), (1,)),
    "4d-bc-batch1": ((1, 4, 5, 3), (1, 3)),
    "4d-channel": ((2, 4, 5, 3), (1, 1, 1, 3)),
    "4d-row": ((2, 4, 5, 3), (2, 4, 1, 1)),
    "2d-same-rank": ((6, 7), (1, 7)),
}


def binary(op: str, sa, sb, const_b=False, act="NONE") -> Case:
    b = In(sb)
    if op == "DIV":  # keep divisors away from zero
        b = In(sb, low=0.5, high=2.0)
    if const_b:
        b = rng_for(op, sb).uniform(0.5, 2.0, sb).astype(np.float32)
    options = (
        {}
        if op in ("MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
        else {"fused_activation_function": act}
    )
    return Case(op, [In(sa), b], options)


BINARY_CASES = {
    f"{op.lower()}-{name}": (lambda op=op, sa=sa, sb=sb: binary(op, sa, sb))
    for op in BINARY_OPS
    for name, (sa, sb) in BROADCASTS.items()
}
BINARY_CASES.update(
    {
        f"{op.lower()}-const-channel": (lambda op=op: binary(op, (1, 3, 4, 5), (5,), True))
        for op in BINARY_OPS
    }
)
BINARY_CASES.update(
    {
        f"{op.lower()}-act-{a}": (lambda op=op, a=a: binary(op, (2, 3, 4), (2, 3, 4), act=a))
        for op in ("ADD", "SUB", "MUL", "DIV")
        for a in ACTS[1:]
    }
)


@pytest.mark.parametrize("make,precision", params(BINARY_CASES))
def test_binary(opencl_device, make, precision):
    check(make(), precision)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_batch_channel_broadcast(opencl_device, op, precision):
    """[b, c] against [b, x, y, c]: a GPU-only broadcast (LiteRT's CPU kernels refuse it)."""
    a = In((2, 4, 5, 3))
    b = In((2, 3), low=0.5, high=2.0)
    case = Case(op, [a, b], out_shape=(2, 4, 5, 3))
    model, xs = case.model(0)
    x, y = xs[0].astype(np.float64), xs[1][:, None, None, :].astype(np.float64)
    want = {
        "ADD": x + y,
        "SUB": x - y,
        "MUL": x * y,
        "DIV": x / y,
        "MAXIMUM": np.maximum(x, y),
        "MINIMUM": np.minimum(x, y),
        "SQUARED_DIFFERENCE": (x - y) ** 2,
    }[op].astype(np.float32)
    assert_close(run_gpu(model, xs, precision)[0], want, TOL[precision])


PRELU_CASES = {
    "channel-alpha": lambda: Case("PRELU", [In((1, 4, 5, 3)), randn("prelu-c", 3)]),
    "hwc-alpha": lambda: Case("PRELU", [In((2, 4, 5, 3)), randn("prelu-hwc", 4, 5, 3)]),
    "scalar-alpha": lambda: Case("PRELU", [In((1, 4, 5, 3)), np.float32([0.25])]),
}


@pytest.mark.parametrize("make,precision", params(PRELU_CASES))
def test_prelu(opencl_device, make, precision):
    check(make(), precision)


LOGICAL_AND_CASES = {
    "same": lambda: Case(
        "LOGICAL_AND", [In((2, 3, 4), np.bool_), In((2, 3, 4), np.bool_)], out_dtype=np.bool_
    ),
    "broadcast-const": lambda: Case(
        "LOGICAL_AND",
        [In((1, 3, 4, 2), np.bool_), np.array([True, False])],
        out_dtype=np.bool_,
    ),
}


@pytest.mark.parametrize("make,precision", params(LOGICAL_AND_CASES))
def test_logical_and(opencl_device, make, precision):
    check(make(), precision)


#: Unary ops and the input range each is defined (and well-conditioned) on.
UNARY = {
    "RELU": (-3.0, 3.0),
    "RELU6": (-3.0, 9.0),
    "LOGISTIC": (-6.0, 6.0),
    "TANH": (-3.0, 3.0),
    "EXP": (-3.0, 3.0),
    "HARD_SWISH": (-5.0, 5.0),
    "RSQRT": (0.25, 4.0),
    "SQRT": (0.0, 9.0),
}
UNARY_CASES = {
    f"{op.lower()}-{len(shape)}d": (
        lambda op=op, lo=lo, hi=hi, s=shape: Case(op, [In(s, low=lo, high=hi)])
    )
    for op, (lo, hi) in UNARY.items()
    for shape in ((2, 5, 6, 3), (7, 9))
}


@pytest.mark.parametrize("make,precision", params(UNARY_CASES))
def test_unary(opencl_device, make, precision):
    check(make(), precision)


# -- data movement ---------------------------------------------------------------------------


def concat(shapes, axis, act="NONE", const_at=None) -> Case:
    operands = [randn(f"cat{i}", *s) if i == const_at else In(s) for i, s in enumerate(shapes)]
    return Case("CONCATENATION", operands, dict(axis=axis, fused_activation_function=act))


CONCAT_CASES = {
    "channels": lambda: concat([(1, 4, 5, 3), (1, 4, 5, 2)], 3),
    "channels-negative-axis": lambda: concat([(1, 4, 5, 3), (1, 4, 5, 1), (1, 4, 5, 2)], -1),
    "height": lambda: concat([(2, 3, 5, 3), (2, 1, 5, 3)], 1),
    "batch": lambda: concat([(1, 2, 3), (2, 2, 3)], 0),
    "2d-last": lambda: concat([(3, 4), (3, 6)], 1),
    "with-constant": lambda: concat([(1, 4, 5, 3), (1, 4, 5, 2)], 3, const_at=1),
    "relu6": lambda: concat([(1, 2, 2, 3), (1, 2, 2, 3)], 3, act="RELU6"),
}


@pytest.mark.parametrize("make,precision", params(CONCAT_CASES))
def test_concatenation(opencl_device, make, precision):
    check(make(), precision)


MOVE_CASES = {
    "reshape-4d-2d": lambda: Case("RESHAPE", [In((1, 4, 5, 6)), np.array([20, 6], np.int32)]),
    "reshape-options": lambda: Case("RESHAPE", [In((2, 3, 4))], dict(new_shape=[6, 4])),
    "reshape-minus1": lambda: Case("RESHAPE", [In((2, 3, 4)), np.array([-1, 2, 2], np.int32)]),
    "pad-hw": lambda: Case(
        "PAD", [In((1, 4, 5, 3)), np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32)]
    ),
    "pad-channels": lambda: Case(
        "PAD", [In((2, 3, 3, 3)), np.array([[0, 0], [0, 0], [0, 0], [1, 4]], np.int32)]
    ),
    "pad-2d": lambda: Case("PAD", [In((3, 4)), np.array([[1, 1], [0, 3]], np.int32)]),
    "strided-slice-basic": lambda: Case(
        "STRIDED_SLICE",
        [In((2, 6, 7, 4)), np.int32([0, 1, 0, 1]), np.int32([2, 5, 7, 4]), np.int32([1, 1, 2, 1])],
    ),
    "strided-slice-masks": lambda: Case(
        "STRIDED_SLICE",
        [In((2, 6, 7, 4)), np.int32([1, 1, 0, 0]), np.int32([0, -1, 0, 3]), np.int32([1, 2, 3, 1])],
        dict(begin_mask=0b0100, end_mask=0b0101),
    ),
    "strided-slice-negative-stride": lambda: Case(
        "STRIDED_SLICE",
        [
            In((1, 5, 6, 3)),
            np.int32([0, 4, 0, 0]),
            np.int32([1, -6, 6, 3]),
            np.int32([1, -1, 1, 1]),
        ],
        dict(end_mask=0b1101),
    ),
    "strided-slice-shrink": lambda: Case(
        "STRIDED_SLICE",
        [In((1, 5, 6, 3)), np.int32([0, 2, 0, 0]), np.int32([1, 3, 6, 3]), np.int32([1, 1, 1, 1])],
        dict(shrink_axis_mask=0b0011),
        version=2,
    ),
    "slice-4d": lambda: Case(
        "SLICE", [In((2, 5, 6, 4)), np.int32([1, 1, 2, 0]), np.int32([1, 3, -1, 2])]
    ),
    "slice-2d": lambda: Case("SLICE", [In((5, 8)), np.int32([2, 3]), np.int32([2, 4])]),
    "transpose-nhwc-nchw": lambda: Case("TRANSPOSE", [In((2, 3, 4, 5)), np.int32([0, 3, 1, 2])]),
    "transpose-hw": lambda: Case("TRANSPOSE", [In((1, 3, 4, 5)), np.int32([0, 2, 1, 3])]),
    "transpose-2d": lambda: Case("TRANSPOSE", [In((6, 7)), np.int32([1, 0])]),
    "transpose-3d": lambda: Case("TRANSPOSE", [In((2, 3, 4)), np.int32([2, 0, 1])]),
    "space-to-depth-2": lambda: Case("SPACE_TO_DEPTH", [In((1, 4, 6, 3))], dict(block_size=2)),
    "space-to-depth-3-batch2": lambda: Case(
        "SPACE_TO_DEPTH", [In((2, 6, 3, 2))], dict(block_size=3)
    ),
    "depth-to-space-2": lambda: Case("DEPTH_TO_SPACE", [In((1, 3, 2, 8))], dict(block_size=2)),
    "depth-to-space-3-batch2": lambda: Case(
        "DEPTH_TO_SPACE", [In((2, 2, 2, 18))], dict(block_size=3)
    ),
}


@pytest.mark.parametrize("make,precision", params(MOVE_CASES))
def test_data_movement(opencl_device, make, precision):
    check(make(), precision)


def resize(op, in_hw, out_hw, align=False, half=False, channels=3) -> Case:
    return Case(
        op,
        [In((2, *in_hw, channels)), np.array(out_hw, np.int32)],
        dict(align_corners=align, half_pixel_centers=half),
        version=3 if half else 1,
    )


RESIZE_CASES = {
    f"{op.split('_')[1].lower()}-{name}": (lambda op=op, args=args: resize(op, *args))
    for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
    for name, args in {
        "up2x": ((4, 5), (8, 10)),
        "up-odd": ((3, 4), (7, 9)),
        "down": ((9, 8), (4, 3)),
        "align-corners-up": ((4, 5), (7, 9), True),
        "align-corners-down": ((9, 8), (5, 3), True),
        "half-pixel-up": ((4, 5), (7, 9), False, True),
        "half-pixel-down": ((9, 8), (4, 3), False, True),
        "to-1x1": ((4, 5), (1, 1)),
    }.items()
}


@pytest.mark.parametrize("make,precision", params(RESIZE_CASES))
def test_resize(opencl_device, make, precision):
    check(make(), precision)


# -- split-K GEMM forced ---------------------------------------------------------------------

SPLITK_CASES = {
    "conv1x1": lambda: conv(hw=(3, 2), k=(1, 1), cin=300, cout=5, act="RELU"),
    "conv1x1-ragged-k": lambda: conv(hw=(2, 2), k=(1, 1), cin=427, cout=3),
    "fc": lambda: fully_connected((2, 640), 9, act="RELU6"),
    "fc-no-bias": lambda: fully_connected((1, 333), 4, bias=False),
}


@pytest.mark.parametrize("make,precision", params(SPLITK_CASES))
def test_split_k_gemm_forced(opencl_device, monkeypatch, make, precision):
    """Many work groups wanted per compute unit: small outputs split K into several slices."""
    from delegate_runtime.gpu.opencl import lowering

    switched(monkeypatch, gemm_groups_per_cu=64)
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "0")  # else GEMMs plan for its grid
    recorded: list[tuple[str, tuple]] = []
    real_emit = lowering.Lowerer.emit

    def emit(self, op, kernel, args, gsize, lsize):
        recorded.append((kernel, gsize))
        return real_emit(self, op, kernel, args, gsize, lsize)

    monkeypatch.setattr(lowering.Lowerer, "emit", emit)
    check(make(), precision)
    splits = [g[2] for kernel, g in recorded if kernel.startswith("gemm") and len(g) == 3]
    assert splits and max(splits) > 1, f"K was not split: {recorded}"
