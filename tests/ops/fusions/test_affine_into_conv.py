"""affine_into_conv: a BatchNormalization (MUL and ADD of per-channel constants) and its
clamping activation run by the 1x1 convolution reading them
(opencl/fusions/affine_into_conv.py)."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.gpu.opencl.fusions import affine_into_conv
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import affine_into_conv as batchnorm_then_conv
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

SHAPE = (1, 6, 7, 8)
MUL, ADD, CONV = 0, 1, 2  #: the nodes of batchnorm_then_conv


def test_the_conv_computes_the_batchnorm_and_its_relu_as_it_loads():
    built = batchnorm_then_conv(SHAPE, 12, "RELU")()
    chains = plan(built.model)
    assert kernels(chains) == {CONV: (MUL, ADD)}
    *_, low, high = chains[CONV].input_affine
    assert (low, high) == (0.0, np.inf)
    assert kernels(plan(built.model, affine_into_conv.NAME)) == {MUL: (ADD,)}


def test_a_batchnorm_read_elsewhere_stays_apart():
    """The ADD's output is also a model output: the conv cannot be its only reader."""
    built = batchnorm_then_conv(SHAPE, 12, "RELU", affine_is_output=True)()
    assert kernels(plan(built.model)) == {MUL: (ADD,)}


@pytest.mark.gpu
def test_the_conv_computes_the_batchnorm(opencl_device, monkeypatch):
    built = batchnorm_then_conv(SHAPE, 12, "RELU6")()
    fused, plain = fused_equals_unfused(
        monkeypatch, built.model, built.inputs, affine_into_conv.NAME
    )
    assert len(fused) == len(plain) - 1, (fused, plain)
