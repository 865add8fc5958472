"""epilogue: the elementwise nodes after a kernel run as steps of its epilogue
(opencl/fusions/epilogue.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.fusions import epilogue
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import X, _conv, _graph, _unary
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

UNARIES = ("RELU", "TANH", "LOGISTIC", "RELU6")


def conv_then(ops: tuple[str, ...], conv_is_output: bool = False):
    """3x3 conv -> each unary op of `ops` in turn: the model and its inputs; node 0 is
    the conv, node i its i-th op."""
    b, g, (x,), ins = _graph(X)
    t = y = _conv(g, x, 8, 8)
    for i, op in enumerate(ops):
        y = _unary(g, op, y, X, f"u{i}")
    g.output(y)
    if conv_is_output:
        g.output(t)
    return b.build(), ins


def test_the_conv_runs_the_nodes_after_it_up_to_max_steps():
    model, _ = conv_then(UNARIES)
    assert epilogue.MAX_STEPS == 3  # the EPILOGUE_PARAMS of common.cl
    chains = plan(model)
    assert kernels(chains) == {0: (1, 2, 3)}
    assert [s.code.name for s in chains[0].steps] == ["RELU", "TANH", "LOGISTIC"]
    assert kernels(plan(model, epilogue.NAME)) == {}


def test_a_conv_output_read_elsewhere_is_not_absorbed():
    model, _ = conv_then(("RELU",), conv_is_output=True)
    assert kernels(plan(model)) == {}


@pytest.mark.gpu
def test_the_epilogue_computes_the_nodes_after_the_conv(opencl_device, monkeypatch):
    model, ins = conv_then(UNARIES)
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, epilogue.NAME)
    assert len(fused) == len(plain) - 3, (fused, plain)
