"""swish: x * sigmoid(x) (a LOGISTIC and the MUL of its input and output) as one step of
the epilogue of the kernel producing x (opencl/fusions/swish.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.codes import Step
from delegate_runtime.gpu.opencl.fusions import swish
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import X, _binary, _conv, _graph, _unary
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

CONV, LOGISTIC, MUL = 0, 1, 2  #: the nodes of conv_swish


def conv_swish(mul_act: str = "NONE"):
    """3x3 conv -> t, LOGISTIC(t) -> s, MUL(t, s) with `mul_act`: the model and its inputs."""
    b, g, (x,), ins = _graph(X)
    t = _conv(g, x, 8, 8)
    s = _unary(g, "LOGISTIC", t, X, "s")
    g.output(_binary(g, "MUL", t, s, X, "y", act=mul_act))
    return b.build(), ins


def test_the_conv_applies_swish_as_one_step():
    model, _ = conv_swish()
    chains = plan(model)
    assert kernels(chains) == {CONV: (LOGISTIC, MUL)}
    assert [s.code for s in chains[CONV].steps] == [Step.SWISH]
    assert kernels(plan(model, swish.NAME)) == {}


def test_a_mul_with_an_activation_is_no_swish():
    model, _ = conv_swish(mul_act="RELU")
    assert kernels(plan(model)) == {}


@pytest.mark.gpu
def test_the_swish_step_computes_the_two_nodes(opencl_device, monkeypatch):
    model, ins = conv_swish()
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, swish.NAME)
    assert len(fused) == len(plain) - 2, (fused, plain)
