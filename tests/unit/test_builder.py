"""The model builder: what it writes reads back the same, and loads in LiteRT."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from model_surgery import ExternalBufferBuilder

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require

DTYPES = [
    np.float32,
    np.float16,
    np.float64,
    np.int8,
    np.uint8,
    np.int16,
    np.int32,
    np.int64,
    np.bool_,
]


def _one_const(data: np.ndarray) -> ModelBuilder:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", data.shape, data.dtype)
    c = g.const("c", data)
    g.output(x, c)
    return b


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_constant_round_trip(dtype: type) -> None:
    data = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    t = read_model(_one_const(data).build()).main.tensors[1]
    assert (t.name, t.shape, t.dtype) == ("c", (2, 3, 4), np.dtype(dtype))
    np.testing.assert_array_equal(t.data, data)
    assert not t.data.flags.writeable


def test_scalar_constant_keeps_rank_0() -> None:
    assert read_model(_one_const(np.float32(2.5)).build()).main.tensors[1].shape == ()


def test_runtime_tensor_round_trip() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 5, 3), shape_signature=(-1, 5, 3))
    v = g.tensor("state", (1, 3), is_variable=True)
    g.output(x)
    tensors = read_model(b.build()).main.tensors
    assert tensors[x].shape_signature == (-1, 5, 3) and tensors[x].data is None
    assert tensors[v].is_variable and not tensors[x].is_variable


QUANTS = {
    "per_tensor": (Quant(0.25, -7), [0.25], [-7], 0),
    "per_channel_axis0": (Quant([0.5, 0.25, 0.125], 0, axis=0), [0.5, 0.25, 0.125], [0, 0, 0], 0),
    "per_channel_axis3": (Quant([0.1, 0.2], [1, 2], axis=3), [0.1, 0.2], [1, 2], 3),
}


@pytest.mark.parametrize("case", QUANTS, ids=QUANTS.keys())
def test_quantization_round_trip(case: str) -> None:
    quant, scale, zero_point, axis = QUANTS[case]
    b = ModelBuilder()
    x = b.main.input("x", (3, 1, 1, 2), np.int8, quant=quant)
    b.main.output(x)
    q = read_model(b.build()).main.tensors[x].quantization
    np.testing.assert_allclose(q.scale, scale)
    np.testing.assert_array_equal(q.zero_point, zero_point)
    assert q.axis == axis and q.per_channel == (len(scale) > 1)


OPTION_CASES = {
    "conv_enums": (
        "CONV_2D",
        dict(padding="VALID", fused_activation_function="RELU6", stride_w=2, stride_h=1),
        dict(padding=1, fused_activation_function=3, stride_w=2, stride_h=1),
    ),
    "reshape_vector": ("RESHAPE", dict(new_shape=[2, 3]), dict(new_shape=[2, 3])),
    "lstm_kernel_type": (
        "LSTM",
        dict(kernel_type="BASIC", cell_clip=0.5),
        dict(kernel_type=1, cell_clip=0.5),
    ),
    "while_indices": (
        "WHILE",
        dict(cond_subgraph_index=0, body_subgraph_index=0),
        dict(cond_subgraph_index=0, body_subgraph_index=0),
    ),
    "no_options": ("LOGISTIC", {}, {}),
}


@pytest.mark.parametrize("case", OPTION_CASES, ids=OPTION_CASES.keys())
def test_options_round_trip(case: str) -> None:
    op, given, expected = OPTION_CASES[case]
    b = ModelBuilder()
    g = b.main
    x, y = g.input("x", (4,)), g.tensor("y", (4,))
    g.op(op, [x], [y], version=3, **given)
    g.output(y)
    read = read_model(b.build(), validate=False).main.operators[0]
    assert (read.op, read.version, read.inputs, read.outputs) == (op, 3, (0,), (1,))
    for key, value in expected.items():
        assert read.options[key] == pytest.approx(value)


def test_options_errors() -> None:
    b = ModelBuilder()
    x, y = b.main.input("x", (4,)), b.main.tensor("y", (4,))
    b.main.op("ADD", [x, x], [y], no_such_field=1)
    with pytest.raises(ValueError, match="no field 'no_such_field'"):
        b.build()


def test_string_option_round_trip() -> None:
    b = ModelBuilder()
    h = b.main.tensor("h", (), np.int32)
    b.main.op("VAR_HANDLE", [], [h], shared_name="counter")
    b.main.output(h)
    assert read_model(b.build()).main.operators[0].options["shared_name"] == "counter"


def test_intermediates_and_optional_inputs_round_trip() -> None:
    b = ModelBuilder()
    g = b.main
    x, y, scratch = g.input("x", (4,)), g.tensor("y", (4,)), g.tensor("scratch", (4,))
    g.op("RELU", [x, -1], [y], intermediates=[scratch])
    g.output(y)
    op = read_model(b.build(), validate=False).main.operators[0]
    assert op.inputs == (x, -1) and op.intermediates == (scratch,)


def test_subgraphs_signatures_description_round_trip() -> None:
    b = ModelBuilder(description="round trip")
    g = b.main
    x, y = g.input("x", (2,)), g.tensor("y", (2,))
    g.op("RELU", [x], [y])
    g.output(y)
    other = b.subgraph("other")
    u = other.input("u", (3,))
    other.output(u)
    b.signature("main_sig", g, {"in": x}, {"out": y})
    b.signature("other_sig", other, {"u": u}, {"u_out": u})
    m = read_model(b.build())
    assert m.description == "round trip" and m.version == 3
    assert [sg.name for sg in m.subgraphs] == ["main", "other"]
    assert m.subgraphs[1].inputs == (0,) and m.subgraphs[1].outputs == (0,)
    sigs = {s.key: (s.subgraph_index, s.inputs, s.outputs) for s in m.signatures}
    assert sigs == {
        "main_sig": (0, {"in": 0}, {"out": 1}),
        "other_sig": (1, {"u": 0}, {"u_out": 0}),
    }


# -- the models load in LiteRT and run the same in ours -----------------------------------


def _conv() -> tuple[bytes, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 5, 5, 2))
    w = g.const("w", rng.normal(size=(3, 3, 3, 2)).astype(np.float32))
    bias = g.const("b", rng.normal(size=3).astype(np.float32))
    y = g.tensor("y", (1, 5, 5, 3))
    g.op(
        "CONV_2D",
        [x, w, bias],
        [y],
        padding="SAME",
        stride_w=1,
        stride_h=1,
        fused_activation_function="RELU",
    )
    g.output(y)
    return b.build(), [rng.normal(size=(1, 5, 5, 2)).astype(np.float32)]


def _external_add() -> tuple[bytes, list[np.ndarray]]:
    b = ExternalBufferBuilder()
    g = b.main
    x, y = g.input("x", (2, 3)), g.tensor("y", (2, 3))
    g.op("ADD", [x, g.const("w", np.arange(6, dtype=np.float32).reshape(2, 3))], [y])
    g.output(y)
    return b.build(), [np.ones((2, 3), np.float32)]


def _quantized_add() -> tuple[bytes, list[np.ndarray]]:
    b = ModelBuilder()
    g = b.main
    q = Quant(0.05, 3)
    x, z = g.input("x", (1, 4), np.int8, quant=q), g.input("z", (1, 4), np.int8, quant=q)
    y = g.tensor("y", (1, 4), np.int8, quant=Quant(0.1, -2))
    g.op("ADD", [x, z], [y])
    g.output(y)
    return b.build(), [np.int8([[1, -50, 100, 7]]), np.int8([[3, 4, -128, 127]])]


def _two_outputs_relu_logistic() -> tuple[bytes, list[np.ndarray]]:
    b = ModelBuilder()
    g = b.main
    x, y, z = g.input("x", (3, 2)), g.tensor("y", (3, 2)), g.tensor("z", (3, 2))
    g.op("RELU", [x], [y])
    g.op("LOGISTIC", [y], [z])
    g.output(y, z)
    return b.build(), [np.float32([[-1, 0.5], [2, -3], [0, 4]])]


LITERT_MODELS: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {
    "conv": _conv,
    "external_buffers": _external_add,
    "quantized_add": _quantized_add,
    "two_ops_two_outputs": _two_outputs_relu_logistic,
}


@pytest.mark.parametrize("name", LITERT_MODELS)
def test_builder_models_run_the_same_in_litert(name: str) -> None:
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    model, inputs = LITERT_MODELS[name]()
    expected = litert.run(model, inputs, reference=True)  # LiteRT's reference kernels
    got = Interpreter(read_model(model)).invoke(inputs)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        if e.dtype.kind in "iu":  # quantized: bit for bit
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_custom_op_reads_back_with_its_code_and_raw_options() -> None:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32)
    y = g.tensor("y", (1, 4), np.float32)
    g.custom_op("MyOp", [x], [y], custom_options=b"\x01\x02\x03", version=2)
    z = g.tensor("z", (1, 4), np.float32)
    g.custom_op("OtherOp", [y], [z])
    g.output(z)
    ops = read_model(b.build(), validate=False).main.operators
    assert [(o.op, o.code, o.version) for o in ops] == [
        ("CUSTOM:MyOp", 32, 2),
        ("CUSTOM:OtherOp", 32, 1),
    ]
    assert ops[0].options == {"custom_options": b"\x01\x02\x03"}
    assert ops[1].options == {}
