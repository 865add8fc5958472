"""When a cold session starts on the first tier (gpu/opencl/first_tier.py): the switch set
decides alone; at its default, on a GPU whose kernel cache holds some of the tier's units,
never where none is cached (a generic kernel took NVIDIA's compiler longer than the
model's own program on an H100) nor on a CPU device. Where some are still to build, the
tier and the own program begin together and the first built is taken (`first_built`)."""

from __future__ import annotations

from concurrent.futures import Future

from delegate_runtime.gpu.opencl.first_tier import first_built, wanted


def test_the_switch_set_decides_alone():
    assert wanted(True, True, is_gpu=False, cached=0, units=5)
    assert not wanted(False, True, is_gpu=True, cached=5, units=5)


def test_at_its_default_a_gpu_with_some_of_the_tier_cached():
    assert wanted(None, True, is_gpu=True, cached=5, units=5)
    assert wanted(None, True, is_gpu=True, cached=1, units=5)  # the rest raced (first_built)
    assert not wanted(None, True, is_gpu=True, cached=0, units=5)
    assert not wanted(None, True, is_gpu=False, cached=5, units=5)
    assert not wanted(None, False, is_gpu=True, cached=5, units=5)
    assert not wanted(None, True, is_gpu=True, cached=0, units=0)


def _done(value: object = None, error: Exception | None = None) -> Future:
    f: Future = Future()
    if error is not None:
        f.set_exception(error)
    else:
        f.set_result(value)
    return f


def test_the_tier_built_first_is_taken():
    assert first_built(_done("tier"), Future()) is True


def test_its_own_built_first_is_taken_and_preferred_when_both_are():
    assert first_built(Future(), _done("own")) is False
    assert first_built(_done("tier"), _done("own")) is False


def test_a_tier_that_failed_leaves_the_session_to_its_own():
    assert first_built(_done(error=RuntimeError("build failed")), _done("own")) is False
