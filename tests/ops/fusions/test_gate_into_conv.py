"""gate_into_conv: a squeeze-excite gate (MUL by a per-channel vector) run by the 1x1
convolution reading the product (opencl/fusions/gate_into_conv.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.fusions import gate_into_conv
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import X, _binary, _conv, _graph
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

MUL, CONV = 0, 1  #: the nodes of gated_projection


def gated_projection(gate_shape: tuple[int, ...]):
    """MUL(x, v) -> 1x1 conv (8 -> 6 channels), v a runtime input of `gate_shape`: the
    model and its inputs."""
    b, g, (x, v), ins = _graph(X, gate_shape)
    gated = _binary(g, "MUL", x, v, X, "gated")
    g.output(_conv(g, gated, 8, 6, k=1, name="p"))
    return b.build(), ins


def test_the_projection_scales_its_input_by_the_gate():
    model, _ = gated_projection((1, 1, 1, 8))
    chains = plan(model)
    assert kernels(chains) == {CONV: (MUL,)}
    x, v = 0, 1  # the model's inputs are its first tensors
    assert chains[CONV].input_scale == (x, v, None)
    assert kernels(plan(model, gate_into_conv.NAME)) == {}


def test_a_product_of_two_maps_is_no_gate():
    """The 'gate' has a value per pixel too: nothing to scale channels by."""
    model, _ = gated_projection(X)
    assert kernels(plan(model)) == {}


@pytest.mark.gpu
def test_the_gated_projection_computes_the_product(opencl_device, monkeypatch):
    model, ins = gated_projection((1, 1, 1, 8))
    fused, plain = fused_equals_unfused(monkeypatch, model, ins, gate_into_conv.NAME)
    assert len(fused) == len(plain) - 1, (fused, plain)
