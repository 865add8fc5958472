"""The fusion pass (opencl/fusions/plan.py): every fusion named in FUSIONS, one module
each, and each one can be turned off by name."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from delegate_runtime.gpu.opencl import fusions
from delegate_runtime.gpu.opencl.fusions import FUSIONS
from tests.ops.fusions.plans import kernels, plan
from tests.ops.test_gpu_squeeze_excite import depthwise_block

#: The package's modules that are no fusion of their own.
NOT_FUSIONS = {"plan", "scope"}


def test_every_fusion_module_is_named_in_the_order():
    modules = {m.name for m in pkgutil.iter_modules(fusions.__path__)} - NOT_FUSIONS
    assert sorted(FUSIONS) == sorted(modules)
    for name in FUSIONS:
        assert name == importlib.import_module(f"{fusions.__name__}.{name}").NAME


def test_an_unknown_fusion_is_refused():
    with pytest.raises(ValueError, match="no such fusion"):
        plan(depthwise_block((10, 12), 32, 8)().model, "fuse_everything")


def test_with_every_fusion_off_each_kernel_runs_its_own_node():
    model = depthwise_block((10, 12), 32, 8, pad=(1, 1))().model
    assert kernels(plan(model))
    chains = plan(model, *FUSIONS)
    assert kernels(chains) == {}
    assert not any(c.clamps or c.clamped for c in chains.values())
