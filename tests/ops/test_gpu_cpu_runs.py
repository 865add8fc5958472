"""The nodes the GPU leaves to the CPU run on LiteRT's CPU runtime (gpu/cpu_runs.py): the
session's outputs against LiteRT running the whole model, the runtime each run took, and
the reference where LiteRT cannot (not installed, or no kernel for a node)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu import cpu_runs
from delegate_runtime.gpu.cpu_runs import cpu_node_runs
from delegate_runtime.gpu.delegate import GpuSession
from delegate_runtime.submodel import submodel_bytes
from tests.conftest import require
from tests.ops.conftest import run_litert
from tests.ops.test_gpu_ops import opencl_device  # noqa: F401  (the fixture)
from tests.ops.test_mediapipe_ops import VALID, pool_options

SHAPE = (1, 4, 5, 6)


def gpu_cpu_gpu_model() -> bytes:
    """RELU, then CEIL and ROUND (no GPU delegate takes them), then MUL: GPU, CPU, GPU."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", SHAPE)
    a, c, r, y = (g.tensor(n, SHAPE) for n in ("a", "c", "r", "y"))
    g.op("RELU", [x], [a])
    g.op("CEIL", [a], [c])
    g.op("ROUND", [c], [r])
    g.op("MUL", [r, x], [y])
    g.output(y)
    return b.build()


def session(data: bytes, **options) -> tuple[GpuSession, str]:
    log = io.StringIO()
    s = GpuSession(
        read_model(data), precision="fp32", log=log, max_delegated_partitions=0, **options
    )
    return s, log.getvalue()


@pytest.fixture
def x() -> np.ndarray:
    return np.random.default_rng(0).uniform(-3, 3, SHAPE).astype(np.float32)


@pytest.mark.usefixtures("opencl_device")
def test_cpu_nodes_between_partitions_run_on_litert(x: np.ndarray) -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    s, log = session(gpu_cpu_gpu_model())
    assert [run.nodes for run in s.cpu_runs] == [[1, 2]]
    assert s.cpu_fallback == "litert"
    assert "CPU nodes 1-2: LiteRT's CPU runtime (XNNPACK, " in log
    np.testing.assert_allclose(s.invoke([x])[0], run_litert(gpu_cpu_gpu_model(), [x])[0], 1e-6)


@pytest.mark.usefixtures("opencl_device")
def test_the_reference_runs_them_when_asked(x: np.ndarray) -> None:
    s, log = session(gpu_cpu_gpu_model(), cpu_runtime="reference")
    assert s.cpu_fallback == "reference"
    assert "the reference interpreter (asked for" in log
    np.testing.assert_allclose(s.invoke([x])[0], run_litert(gpu_cpu_gpu_model(), [x])[0], 1e-6)


@pytest.mark.usefixtures("opencl_device")
def test_without_litert_the_reference_runs_them_and_says_why(
    x: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = run_litert(gpu_cpu_gpu_model(), [x])[0]
    monkeypatch.setattr(cpu_runs.litert, "available", lambda: False)
    s, log = session(gpu_cpu_gpu_model())
    assert s.cpu_fallback == "reference"
    assert "ai-edge-litert is not installed" in log
    np.testing.assert_allclose(s.invoke([x])[0], want, 1e-6)


def argmax_then_gpu_model() -> bytes:
    """MediaPipe's MaxPoolingWithArgmax2D (LiteRT has no kernel for it), CEIL, then three
    RELUs: with one partition allowed, the GPU keeps the RELUs and the pool goes to the CPU."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4, 4, 2))
    y, idx = g.tensor("y", (1, 2, 2, 2)), g.tensor("idx", (1, 2, 2, 2))
    g.custom_op("MaxPoolingWithArgmax2D", [x], [y, idx], pool_options(VALID, (2, 2), (2, 2)))
    c = g.tensor("c", (1, 2, 2, 2))
    g.op("CEIL", [y], [c])
    last = c
    for i in range(3):
        nxt = g.tensor(f"r{i}", (1, 2, 2, 2))
        g.op("RELU", [last], [nxt])
        last = nxt
    g.output(last, idx)
    return b.build()


@pytest.mark.usefixtures("opencl_device")
def test_a_custom_op_of_the_app_runs_on_the_reference() -> None:
    """LiteRT's stock build runs a MaxPoolingWithArgmax2D of its own that writes int32
    bits into the float32 indices MediaPipe's kernels read as values: not ours to mix."""
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    log = io.StringIO()
    model = read_model(argmax_then_gpu_model())
    s = GpuSession(model, precision="fp32", log=log, max_delegated_partitions=1)
    assert s.cpu_fallback == "reference"
    assert "CUSTOM:MaxPoolingWithArgmax2D: a custom op's kernel is the app's own" in log.getvalue()
    x = np.random.default_rng(1).uniform(-3, 3, (1, 4, 4, 2)).astype(np.float32)
    from delegate_runtime.interpreter import Interpreter

    want = Interpreter(model).invoke([x])
    for got, w in zip(s.invoke([x]), want, strict=True):
        np.testing.assert_allclose(got, w, 1e-6)


@pytest.mark.parametrize(
    "partitions,want",
    [
        pytest.param([], [[0, 1, 2, 3]], id="nothing-delegated"),
        pytest.param([[0, 1, 2, 3]], [], id="all-delegated"),
        pytest.param([[0], [3]], [[1, 2]], id="between"),
        pytest.param([[1, 2]], [[0], [3]], id="around"),
    ],
)
def test_cpu_node_runs(partitions, want) -> None:
    assert cpu_node_runs(4, partitions) == want


def test_submodel_keeps_its_boundary_and_runs_as_the_whole() -> None:
    require(litert.available(), "ai-edge-litert (the official CPU runtime)")
    data = gpu_cpu_gpu_model()
    model = read_model(data)
    sub, ins, outs = submodel_bytes(model, [1, 2])
    names = [model.main.tensors[t].name for t in (*ins, *outs)]
    assert names == ["a", "r"]
    a = np.random.default_rng(2).uniform(0, 3, SHAPE).astype(np.float32)
    np.testing.assert_array_equal(run_litert(sub, [a])[0], np.round(np.ceil(a)))


def test_a_model_the_gpu_takes_nothing_of_still_resizes_on_the_reference() -> None:
    """No partition was planned: an input of another length than declared runs on the
    reference, which sizes every node as it goes (LiteRT's run was built for the declared)."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), shape_signature=(1, -1))
    y = g.tensor("y", (1, 4), shape_signature=(1, -1))
    g.op("CEIL", [x], [y])
    g.output(y)
    s, _ = session(b.build())
    longer = np.linspace(-2, 2, 8, dtype=np.float32).reshape(1, 8)
    np.testing.assert_array_equal(s.invoke([longer])[0], np.ceil(longer))
