"""mean_into_gemm: a MEAN over the pixels run by the GEMM that alone reads it, each mean
computed as A is loaded (opencl/fusions/mean_into_gemm.py)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.opencl.fusions import mean_into_gemm
from delegate_runtime.gpu.switches import DEFAULTS
from tests.ops.fusions.plans import fused_equals_unfused, kernels, plan
from tests.ops.test_gpu_fusion import mean_into_conv
from tests.ops.test_gpu_ops import opencl_device

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

MEAN, CONV = 0, 1  #: the nodes of mean_into_conv(...)


def test_the_gemm_computes_the_means():
    model = mean_into_conv((1, 7, 7, 16), 8)().model
    chains = plan(model)
    assert kernels(chains) == {CONV: (MEAN,)}
    assert chains[CONV].input_mean == MEAN
    assert kernels(plan(model, mean_into_gemm.NAME)) == {}


def test_a_wide_gemm_leaves_the_mean_its_launch():
    """Past the switches' mean_max_reader_channels the GEMM would recompute the means too
    often; the session's limit is the one the rule reads."""
    wide = DEFAULTS.mean_max_reader_channels + 8
    model = mean_into_conv((1, 4, 4, 16), wide)().model
    assert kernels(plan(model)) == {}
    raised = DEFAULTS.replace(mean_max_reader_channels=wide)
    assert kernels(plan(model, switches=raised)) == {CONV: (MEAN,)}


@pytest.mark.gpu
def test_the_gemm_computes_the_mean(opencl_device, monkeypatch):
    built = mean_into_conv((1, 7, 7, 16), 8)()
    fused, plain = fused_equals_unfused(monkeypatch, built.model, built.inputs, mean_into_gemm.NAME)
    assert len(fused) == len(plain) - 1, (fused, plain)
