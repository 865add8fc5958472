"""When a cold session starts on the first tier (gpu/opencl/first_tier.py `wanted`): the
switch set decides alone; at its default, on a GPU whose kernel cache holds some of the
tier's units, never on an empty cache (there the tier's build took longer than the own
program's on an H100) nor on a CPU device."""

from __future__ import annotations

from delegate_runtime.gpu.opencl.first_tier import wanted


def test_the_switch_set_decides_alone():
    assert wanted(True, True, is_gpu=False, cached=0)
    assert not wanted(False, True, is_gpu=True, cached=5)


def test_at_its_default_a_gpu_with_some_of_the_tier_cached():
    assert wanted(None, True, is_gpu=True, cached=1)
    assert not wanted(None, True, is_gpu=True, cached=0)
    assert not wanted(None, True, is_gpu=False, cached=5)
