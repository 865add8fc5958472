"""Hand-built hostile models, each its own case, on the CPU reference and on the GPU
delegate (PoCL where there is no GPU), each run in a child process under a memory and a
time limit (sandbox.py). Each must end as LiteRT decides: refused with a ModelError that
names the op and the reason, stopped at the deadline (endless WHILE), or run. Those LiteRT
runs are compared with its reference kernels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hostile import HOSTILE, LITERT_RUNS
from sandbox import Sandbox

from delegate_runtime import litert


def _tests_conftest():  # noqa: ANN202 - tests/conftest.py by path (another tier's may shadow it)
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "conftest.py"
    spec = importlib.util.spec_from_file_location("_devicefarm_tests_conftest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


require = _tests_conftest().require


def _opencl_available() -> bool:
    try:
        import pyopencl as cl

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:
        return False


def _cases() -> list:
    cases = []
    for name in sorted(HOSTILE):
        cases.append(pytest.param(name, "cpu", id=f"{name}-cpu"))
        cases.append(pytest.param(name, "gpu", id=f"{name}-gpu"))
    return cases


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox() as sb:
        yield sb


@pytest.mark.parametrize(("name", "backend"), _cases())
def test_hostile_model_ends_clearly(sandbox: Sandbox, name: str, backend: str) -> None:
    if backend == "gpu":
        require(_opencl_available(), "an OpenCL platform (PoCL)")
    build, kind, pattern = HOSTILE[name]
    data, feeds = build()
    outcome = sandbox.run(backend, data, feeds)
    assert outcome.kind == kind, f"{name} on {backend}: {outcome.kind}: {outcome.message}"
    assert re.search(pattern, outcome.message), outcome.message


#: Tolerance against LiteRT's reference kernels: the CPU reference, and the GPU's fp32.
TOLERANCE = {"cpu": 1e-6, "gpu": 1e-4}


def _litert_outputs(data: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    require(litert.available(), "ai-edge-litert")
    from ai_edge_litert.interpreter import Interpreter as LiteRT
    from ai_edge_litert.interpreter import OpResolverType

    it = LiteRT(
        model_content=data,
        num_threads=1,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
    )
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds, strict=True):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("name", LITERT_RUNS)
def test_hostile_model_litert_runs_as_we_do(sandbox: Sandbox, name: str, backend: str) -> None:
    """Where LiteRT runs a hostile-looking model, our CPU reference and the GPU delegate
    (in the sandbox) give its outputs, shapes included."""
    if backend == "gpu":
        require(_opencl_available(), "an OpenCL platform (PoCL)")
    data, feeds = HOSTILE[name][0]()
    expected = _litert_outputs(data, feeds)
    outcome = sandbox.run(backend, data, feeds)
    assert outcome.kind == "ok", outcome.message
    tol = TOLERANCE[backend]
    for e, g in zip(expected, outcome.outputs, strict=True):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)
