"""An input's shape_signature is read when an input is resized, never for the declared
shape: LiteRT runs a model whose signature disagrees with its shape (another rank, another
fixed dimension) at the declared shape, and so must the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.builder import ModelBuilder
from delegate_runtime.errors import JobError
from delegate_runtime.interpreter import Interpreter
from tests.conftest import require

X = np.float32([[1, -2, 3, -4]])


def _relu(signature: tuple[int, ...]) -> bytes:
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 4), np.float32, shape_signature=signature)
    y = g.tensor("y", (1, 4), np.float32)
    g.op("RELU", [x], [y])
    g.output(y)
    return b.build()


@pytest.mark.parametrize(
    "signature", [(1, 4, 7), (2, 4), (-1, 5)], ids=["other-rank", "other-batch", "other-dim"]
)
def test_the_declared_shape_runs_whatever_the_signature(signature):
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    model = _relu(signature)
    want = litert.run(model, [X], reference=True)[0]
    np.testing.assert_array_equal(Interpreter(read_model(model)).invoke([X])[0], want)


def test_a_resize_follows_the_signature():
    """(-1, 4): any batch; a fixed dimension of the signature stays fixed."""
    it = Interpreter(read_model(_relu((-1, 4))))
    x3 = np.tile(X, (3, 1))
    np.testing.assert_array_equal(it.invoke([x3])[0], np.maximum(x3, 0))
    with pytest.raises(JobError, match=r"input 0 'x' must have shape \[-1, 4\], got \[1, 5\]"):
        it.invoke([np.zeros((1, 5), np.float32)])
