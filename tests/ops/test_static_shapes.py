"""Inputs resized as benchmark_model's --input_layer_shape does, every shape made static:
the resized model against LiteRT resizing the same input (its ResizeInputTensor), on the
CPU reference and on the GPU delegate (which plans from declared shapes)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import JobError
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.static_shapes import parse_input_layers, with_input_shapes
from tests.ops.conftest import run_litert
from tests.ops.test_gpu_ops import opencl_device  # noqa: F401  (the fixture)


def audio_like_model() -> bytes:
    """samples [1, -1] (declared [1, 4]) -> frames of 4 -> per-frame energy, log."""
    b = ModelBuilder()
    g = b.main
    x = g.input("samples", (1, 4), shape_signature=(1, -1))
    frames = g.tensor("frames", (1, 1, 4), shape_signature=(1, -1, 4))
    g.op("RESHAPE", [x, g.const("shape", np.array([1, -1, 4], np.int32))], [frames])
    sq = g.tensor("sq", (1, 1, 4), shape_signature=(1, -1, 4))
    g.op("MUL", [frames, frames], [sq])
    energy = g.tensor("energy", (1, 1), shape_signature=(1, -1))
    g.op("SUM", [sq, g.const("axis", np.array([2], np.int32))], [energy], keep_dims=False)
    out = g.tensor("log_energy", (1, 1), shape_signature=(1, -1))
    g.op("LOG", [energy], [out])
    g.output(out)
    return b.build()


def test_resized_model_declares_every_shape() -> None:
    model = with_input_shapes(read_model(audio_like_model()), {"samples": (1, 64)})
    shapes = {t.name: t.shape for t in model.main.tensors if not t.is_constant}
    assert shapes == {
        "samples": (1, 64),
        "frames": (1, 16, 4),
        "sq": (1, 16, 4),
        "energy": (1, 16),
        "log_energy": (1, 16),
    }


def test_resized_model_runs_as_litert_runs_the_resized_input() -> None:
    data = audio_like_model()
    x = np.random.default_rng(0).uniform(0.5, 2, (1, 64)).astype(np.float32)
    resized = with_input_shapes(read_model(data), {"samples": (1, 64)})
    got = Interpreter(resized).invoke([x])[0]
    np.testing.assert_allclose(got, run_litert(data, [x])[0], rtol=1e-5, atol=1e-6)


def test_the_original_model_is_left_as_it_was() -> None:
    model = read_model(audio_like_model())
    with_input_shapes(model, {"samples": (1, 64)})
    assert model.main.tensors[model.main.inputs[0]].shape == (1, 4)


def test_an_unknown_input_name_is_a_job_error() -> None:
    with pytest.raises(JobError, match="no input named 'audio'.*samples"):
        with_input_shapes(read_model(audio_like_model()), {"audio": (1, 64)})


def test_a_shape_the_signature_forbids_is_a_job_error() -> None:
    with pytest.raises(JobError, match="samples"):
        with_input_shapes(read_model(audio_like_model()), {"samples": (2, 64)})


@pytest.mark.parametrize(
    "names,shapes,want",
    [
        pytest.param("a", "1,1280", {"a": (1, 1280)}, id="one"),
        pytest.param("a,b", "1,16:2,3,4", {"a": (1, 16), "b": (2, 3, 4)}, id="two"),
        pytest.param(" a , b ", " 1,16 : 5 ", {"a": (1, 16), "b": (5,)}, id="spaces"),
    ],
)
def test_parse_input_layers_reads_benchmark_models_form(names, shapes, want) -> None:
    assert parse_input_layers(names, shapes) == want


@pytest.mark.parametrize(
    "names,shapes,match",
    [
        pytest.param("a,b", "1,16", "2 inputs but .* 1 shapes", id="count"),
        pytest.param("a", "1,x", "positive integers", id="not-a-number"),
        pytest.param("a", "1,-1", "positive integers", id="negative"),
        pytest.param("a", "1,0", "a dimension is 0", id="zero"),
    ],
)
def test_parse_input_layers_refuses_with_the_reason(names, shapes, match) -> None:
    with pytest.raises(JobError, match=match):
        parse_input_layers(names, shapes)


@pytest.mark.usefixtures("opencl_device")
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_gpu_delegate_runs_the_resized_model_whole(precision: str) -> None:
    from tests.ops.test_gpu_ops import run_gpu

    data = audio_like_model()
    x = np.random.default_rng(1).uniform(0.5, 2, (1, 64)).astype(np.float32)
    resized = with_input_shapes(read_model(data), {"samples": (1, 64)})
    got = run_gpu(resized, [x], precision)[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(got, run_litert(data, [x])[0], rtol=tol, atol=tol)
