"""The official LiteRT interpreter (ai-edge-litert), the reference our kernels answer to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def available() -> bool:
    """Whether ai-edge-litert is installed."""
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def lacks_kernel(error: Exception) -> bool:
    """Whether LiteRT refused a model because its chosen resolver has no kernel for an op
    (a builtin op or version, or a custom op)."""
    return any(s in str(error) for s in ("Didn't find op for", "unresolved custom op"))


def make_interpreter(
    model: bytes,
    num_threads: int = 1,
    xnnpack: bool = True,
    reference: bool = False,
    input_shapes: Sequence[tuple[int, ...]] | None = None,
) -> Any:
    """A LiteRT interpreter on `model` bytes, tensors allocated (after resizing its inputs
    to `input_shapes`, where given: a model declaring a placeholder shape may not even
    prepare at it, as openWakeWord's melspectrogram at [1, 1]).

    xnnpack=False selects the builtin optimized kernels (no default delegate);
    reference=True the reference kernels (BUILTIN_REF), the oracle for integer arithmetic.
    """
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    if reference:
        resolver = OpResolverType.BUILTIN_REF
    it = Interpreter(
        model_content=bytes(model), num_threads=num_threads, experimental_op_resolver_type=resolver
    )
    for d, shape in zip(it.get_input_details(), input_shapes or (), strict=False):
        if tuple(d["shape"]) != tuple(shape):
            it.resize_tensor_input(d["index"], list(shape))
    it.allocate_tensors()
    return it


def run(
    model: bytes,
    inputs: Sequence[np.ndarray],
    num_threads: int = 1,
    xnnpack: bool = True,
    reference: bool = False,
) -> list[np.ndarray]:
    """Run `model` once in the official interpreter; outputs in model output order."""
    shapes = [np.shape(x) for x in inputs]
    it = make_interpreter(model, num_threads, xnnpack, reference, shapes)
    for d, x in zip(it.get_input_details(), inputs, strict=True):
        it.set_tensor(d["index"], np.asarray(x))
    it.invoke()
    return [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
