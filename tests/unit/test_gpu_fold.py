"""Static folding before partitioning: shape chains, DEQUANTIZE of weights, whole models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from delegate_runtime import load_model, read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.gpu.fold import fold_constants
from delegate_runtime.gpu.partition import partition
from delegate_runtime.gpu.support import SupportOptions
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require

SHARED = Path(__file__).resolve().parents[3] / "shared"
MOBILENET = SHARED / "models" / "mobilenet_v1_1.0_224_fp32.tflite"
CONFORMANCE = SHARED / "conformance" / "dev"


def shape_chain_model():
    """Keras' flatten: SHAPE -> STRIDED_SLICE (batch) -> PACK [batch, -1] -> RESHAPE."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 3))
    r = g.tensor("r", (1, 4, 4, 3))
    g.op("RELU", [x], [r])
    s = g.tensor("shape", (4,), np.int32)
    g.op("SHAPE", [r], [s], out_type=2)  # TensorType.INT32
    batch = g.tensor("batch", (), np.int32)
    g.op(
        "STRIDED_SLICE",
        [s, g.const("b", np.int32([0])), g.const("e", np.int32([1])), g.const("st", np.int32([1]))],
        [batch],
        shrink_axis_mask=1,
    )
    packed = g.tensor("packed", (2,), np.int32)
    g.op("PACK", [batch, g.const("m1", np.array(-1, np.int32))], [packed], values_count=2, axis=0)
    flat = g.tensor("flat", (1, 48), np.float32)
    g.op("RESHAPE", [r, packed], [flat])
    y = g.tensor("y", (1, 48))
    g.op("RELU6", [flat], [y])
    g.output(y)
    return read_model(b.build())


def dequantized_weights_model(dtype, quant=None) -> bytes:
    """Weights stored as fp16 or int8, DEQUANTIZE'd to float32 for a CONV_2D."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3))
    stored = (w * 50).astype(np.int8) if dtype == np.int8 else w.astype(np.float16)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 5, 5, 3))
    wq = g.const("wq", stored, quant=quant)
    wf = g.tensor("wf", (4, 3, 3, 3))
    g.op("DEQUANTIZE", [wq], [wf], version=3 if dtype == np.float16 else 2)
    y = g.tensor("y", (1, 5, 5, 4))
    g.op("CONV_2D", [x, wf, -1], [y], padding="SAME", stride_h=1, stride_w=1)
    g.output(y)
    return b.build()


def summary(model):
    return partition(model.main, SupportOptions())


def test_shape_chain_is_folded_and_delegates_whole():
    model = shape_chain_model()
    assert not summary(model).fully_delegated  # SHAPE and PACK are not GPU ops
    folded, count = fold_constants(model)
    assert count == 3
    assert [op.op for op in folded.main.operators] == ["RELU", "RESHAPE", "RELU6"]
    assert [op.index for op in folded.main.operators] == [0, 1, 2]
    reshape = folded.main.operators[1]
    shape_tensor = folded.main.tensors[reshape.inputs[1]]
    assert shape_tensor.is_constant
    np.testing.assert_array_equal(shape_tensor.data, [1, -1])
    assert summary(folded).fully_delegated


def test_folding_keeps_results_and_leaves_the_model_alone():
    model = shape_chain_model()
    before = [op.op for op in model.main.operators]
    folded, _ = fold_constants(model)
    assert [op.op for op in model.main.operators] == before
    assert not model.main.tensors[model.main.operators[1].outputs[0]].is_constant
    x = np.random.default_rng(1).standard_normal((1, 4, 4, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        Interpreter(folded).invoke([x])[0], Interpreter(model).invoke([x])[0]
    )


@pytest.mark.parametrize(
    "dtype,quant", [(np.float16, None), (np.int8, Quant(0.02, 0))], ids=["fp16", "int8"]
)
def test_dequantize_of_weights_is_folded(dtype, quant):
    model = read_model(dequantized_weights_model(dtype, quant))
    folded, count = fold_constants(model)
    assert count == 1
    assert [op.op for op in folded.main.operators] == ["CONV_2D"]
    w = folded.main.tensors[folded.main.operators[0].inputs[1]]
    assert w.is_constant and w.data.dtype == np.float32 and not w.data.flags.writeable
    assert summary(folded).fully_delegated
    x = np.random.default_rng(2).standard_normal((1, 5, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(
        Interpreter(folded).invoke([x])[0], Interpreter(model).invoke([x])[0], rtol=1e-6, atol=1e-6
    )


def test_graph_outputs_are_never_folded():
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (2, 3))
    c = g.const("c", np.ones((2, 3), np.float16))
    cf = g.tensor("cf", (2, 3))
    g.op("DEQUANTIZE", [c], [cf], version=3)
    y = g.tensor("y", (2, 3))
    g.op("ADD", [x, cf], [y])
    g.output(y, cf)
    folded, count = fold_constants(read_model(b.build()))
    assert count == 0 and len(folded.main.operators) == 2


def test_runtime_ops_are_not_folded():
    folded, count = fold_constants(read_model(dequantized_weights_model(np.float16)))
    conv = folded.main.operators[0]
    assert not folded.main.tensors[conv.outputs[0]].is_constant


def test_mobilenet_delegates_whole():
    require(MOBILENET.exists(), f"{MOBILENET} (../shared)")
    folded, _ = fold_constants(load_model(MOBILENET))
    d = summary(folded)
    assert d.fully_delegated and d.partitions == [list(range(d.total_nodes))]
    assert d.messages() == [
        f"Replacing {d.total_nodes} out of {d.total_nodes} node(s) with delegate "
        "(TfLiteGpuDelegateV2) node, yielding 1 partitions for the whole graph."
    ]


#: fp16: the 3-op shape chain and 56 DEQUANTIZEs (weights and biases of 28 conv layers).
@pytest.mark.parametrize("variant,folded_ops", [("fp32", 3), ("fp16", 59), ("int8", 3)])
def test_converted_keras_mobilenet_delegates_whole_after_folding(variant, folded_ops):
    """The official converter's MobileNets: a shape chain (and fp16 weights) folded."""
    path = CONFORMANCE / f"mobilenet_v1_025_128__{variant}.tflite"
    require(path.exists(), f"{path} (../shared)")
    model = load_model(path)
    assert not summary(model).fully_delegated
    folded, count = fold_constants(model)
    assert count == folded_ops
    assert {"SHAPE", "PACK"}.isdisjoint(op.op for op in folded.main.operators)
    assert summary(folded).fully_delegated
