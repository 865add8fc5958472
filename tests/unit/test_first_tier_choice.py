"""When a cold session starts on the first tier (gpu/opencl/first_tier.py `wanted`): the
switch set decides alone; at its default, on a GPU whose kernel cache holds every one of the
tier's units, never where one is still to build (a generic kernel took NVIDIA's compiler
longer than the model's own program on an H100) nor on a CPU device."""

from __future__ import annotations

from delegate_runtime.gpu.opencl.first_tier import wanted


def test_the_switch_set_decides_alone():
    assert wanted(True, True, is_gpu=False, cached=0, units=5)
    assert not wanted(False, True, is_gpu=True, cached=5, units=5)


def test_at_its_default_a_gpu_with_the_whole_tier_cached():
    assert wanted(None, True, is_gpu=True, cached=5, units=5)
    assert not wanted(None, True, is_gpu=True, cached=4, units=5)  # one to build: no tier
    assert not wanted(None, True, is_gpu=True, cached=0, units=5)
    assert not wanted(None, True, is_gpu=False, cached=5, units=5)
    assert not wanted(None, True, is_gpu=True, cached=0, units=0)
