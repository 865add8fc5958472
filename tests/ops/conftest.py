"""Op-test helpers: build a one-op model, run it in LiteRT and in our interpreter, compare.

The oracle is LiteRT's reference kernels (BUILTIN_REF), the kernels TFLite defines its
arithmetic by: integer outputs must match them bit for bit, float outputs within
accumulation noise. LiteRT's default kernels (XNNPACK) round int8 differently and are no
oracle for a reference interpreter."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from delegate_runtime import litert, read_model
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require

#: Tolerances of the CPU reference against LiteRT, float outputs.
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-5
#: LiteRT's kernels: the reference ones (BUILTIN_REF), the oracle; the builtin optimized
#: ones without XNNPACK (BUILTIN_WITHOUT_DEFAULT_DELEGATES), only where a case says why.
REFERENCE, BUILTIN = "reference", "builtin"


def run_ours(
    model: bytes, inputs: Sequence[np.ndarray], precision: str = "fp32"
) -> list[np.ndarray]:
    return Interpreter(read_model(model), precision=precision).invoke(list(inputs))


def oracle_kernels(model: bytes, oracle: str = REFERENCE) -> dict[str, bool]:
    """The `litert` keyword arguments that pick the oracle's kernels for `model`: LiteRT's
    reference kernels, or its builtin ones (optimized, no XNNPACK) where a case says why
    (oracle=BUILTIN) or where the reference resolver has no kernel for an op of `model`
    (e.g. ELU), which a warning then says."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    if oracle == REFERENCE:
        try:
            litert.make_interpreter(model, reference=True)
            return {"reference": True}
        except ValueError as e:
            if not litert.lacks_kernel(e):
                raise
            reason = str(e).splitlines()[0]
            warnings.warn(f"compared with LiteRT's builtin kernels: {reason}", stacklevel=3)
    return {"xnnpack": False}


def litert_interpreter(model: bytes, oracle: str = REFERENCE) -> Any:
    """A single-threaded LiteRT interpreter on the oracle's kernels (see oracle_kernels)."""
    return litert.make_interpreter(model, **oracle_kernels(model, oracle))


def run_litert(
    model: bytes, inputs: Sequence[np.ndarray], oracle: str = REFERENCE
) -> list[np.ndarray]:
    """`model` once in LiteRT, single-threaded, on the oracle's kernels (see oracle_kernels)."""
    return litert.run(model, inputs, **oracle_kernels(model, oracle))


def assert_matches_litert(
    model: bytes,
    inputs: Sequence[np.ndarray],
    rtol: float = FLOAT_RTOL,
    atol: float = FLOAT_ATOL,
    quant_steps: float = 0,
    oracle: str = REFERENCE,
) -> list[np.ndarray]:
    """Our outputs equal LiteRT's reference kernels': floats within rtol/atol (atol scaled
    to the output's magnitude), integers exactly (or within `quant_steps`, where a case
    says why). oracle=BUILTIN compares with LiteRT's builtin kernels, where a case says why
    the reference kernels are no oracle."""
    expected = run_litert(model, inputs, oracle)
    got = run_ours(model, inputs)
    assert len(got) == len(expected)
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert g.shape == e.shape, f"output {i}: shape {g.shape} != LiteRT {e.shape}"
        assert g.dtype == e.dtype, f"output {i}: dtype {g.dtype} != LiteRT {e.dtype}"
        if e.dtype.kind in "iub":
            diff = np.abs(g.astype(np.int64) - e.astype(np.int64))
            assert diff.max(initial=0) <= quant_steps, f"output {i}: off by {diff.max()} steps"
        else:
            scale = max(float(np.abs(e).max(initial=0)), 1.0)
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol * scale, err_msg=f"output {i}")
    return got


def run_both_invokes(model: bytes, feeds: Sequence[Sequence[np.ndarray]]) -> tuple[list, list]:
    """Outputs of each invoke in LiteRT (its reference kernels) and in ours, one interpreter
    each, so that state tensors carry from invoke to invoke (LSTMs, RNNs)."""
    ref = litert_interpreter(model)
    ours = Interpreter(read_model(model))
    expected, got = [], []
    for xs in feeds:
        for d, x in zip(ref.get_input_details(), xs, strict=True):
            ref.set_tensor(d["index"], x)
        ref.invoke()
        expected.append([np.array(ref.get_tensor(d["index"])) for d in ref.get_output_details()])
        got.append(ours.invoke(list(xs)))
    return expected, got
