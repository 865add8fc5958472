"""Op-test helpers: build a one-op model, run it in LiteRT and in our interpreter, compare."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.interpreter import Interpreter

#: Tolerances of the CPU reference against LiteRT, float outputs.
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-5


def run_ours(
    model: bytes, inputs: Sequence[np.ndarray], precision: str = "fp32"
) -> list[np.ndarray]:
    return Interpreter(read_model(model), precision=precision).invoke(list(inputs))


def run_litert(
    model: bytes, inputs: Sequence[np.ndarray], xnnpack: bool = True
) -> list[np.ndarray]:
    if not litert.available():
        pytest.skip("ai-edge-litert is not installed")
    return litert.run(model, inputs, xnnpack=xnnpack)


def assert_matches_litert(
    model: bytes,
    inputs: Sequence[np.ndarray],
    rtol: float = FLOAT_RTOL,
    atol: float = FLOAT_ATOL,
    quant_steps: float = 1.0,
    xnnpack: bool = True,
) -> list[np.ndarray]:
    """Our outputs equal LiteRT's: floats within rtol/atol (atol scaled to the output's
    magnitude), integers within `quant_steps` (one quantization step by default).

    xnnpack=False compares with LiteRT's builtin kernels instead of its default delegate
    (XNNPACK rounds some quantized ops differently)."""
    expected = run_litert(model, inputs, xnnpack=xnnpack)
    got = run_ours(model, inputs)
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != LiteRT {e.shape}"
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype} != LiteRT {e.dtype}"
        if e.dtype.kind in "iub":
            diff = np.abs(g.astype(np.int64) - e.astype(np.int64))
            assert diff.max(initial=0) <= quant_steps, f"output {i}: off by {diff.max()} steps"
        else:
            scale = max(float(np.abs(e).max(initial=0)), 1.0)
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol * scale, err_msg=f"output {i}")
    return got
