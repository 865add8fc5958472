"""relu_into_readers: a RELU no kernel absorbed, elided into its readers, which clamp the
values they load (opencl/fusions/relu_into_readers.py)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.gpu.opencl.fusions import relu_into_readers
from tests.ops.fusions.plans import fused_equals_unfused, plan
from tests.ops.test_gpu_fusion import X, _binary, _conv, _graph, _unary
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

H, RELU, READER = 0, 1, 2  #: the nodes of relu_read_unclamped_too


def relu_read_unclamped_too(reader_k: int):
    """1x1 conv -> h, RELU(h) -> r, a k x k conv of r -> y, ADD(h, y): h is read clamped
    and unclamped, so no epilogue can take the RELU. The model and its inputs."""
    b, g, (x,), ins = _graph(X)
    ins[0] *= 4
    h = _conv(g, x, 8, 8, k=1, name="h")
    r = _unary(g, "RELU", h, X, "r")
    y = _conv(g, r, 8, 8, k=reader_k, name="y")
    g.output(_binary(g, "ADD", h, y, X, "out"))
    return b.build(), ins


def clamps(chains) -> dict[int, list[int]]:
    return {n: c.clamps for n, c in chains.items() if c.clamps}


def test_a_gemm_reader_clamps_what_it_loads():
    model, _ = relu_read_unclamped_too(reader_k=1)
    chains = plan(model)
    assert clamps(chains) == {READER: [RELU]}
    ((read, low, high),) = chains[READER].clamped.values()
    assert (low, high) == (0.0, np.inf)
    assert clamps(plan(model, relu_into_readers.NAME)) == {}


def test_a_3x3_conv_reader_leaves_the_relu_its_launch():
    model, _ = relu_read_unclamped_too(reader_k=3)
    assert clamps(plan(model)) == {}


@pytest.mark.gpu
def test_the_clamping_reader_computes_the_relu(opencl_device, monkeypatch):
    model, ins = relu_read_unclamped_too(reader_k=1)
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, relu_into_readers.NAME)
    assert len(fused) == len(plain) - 1, (fused, plain)
