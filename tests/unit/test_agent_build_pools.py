"""The worker agent's resident builders (worker_agent/build_pools.py): which devices get
them, how many, and a pool that cannot start leaves the agent serving."""

from __future__ import annotations

import pytest

from worker_agent.build_pools import BuildPools, builders_wanted, wants_pool, warm_tier
from worker_agent.devices import DeviceInfo


def gpu(platform: str, spec: str = "0:0") -> DeviceInfo:
    facts = {"platform": platform, "opencl_spec": spec}
    return DeviceInfo(key=f"opencl:{platform}:{spec}", kind="opencl", facts=facts)


def test_only_drivers_that_compile_one_program_per_process_get_builders():
    assert wants_pool(gpu("NVIDIA CUDA"))
    assert not wants_pool(gpu("Portable Computing Language"))
    assert not wants_pool(DeviceInfo(key="cpu:x", kind="cpu", facts={"platform": "NVIDIA CUDA"}))


def test_the_builders_wanted_come_from_the_setting_else_the_cpus(monkeypatch):
    assert builders_wanted({"DEVICEFARM_BUILD_POOL": "4"}) == 4
    assert builders_wanted({"DEVICEFARM_BUILD_POOL": "0"}) == 0
    with pytest.raises(ValueError, match="DEVICEFARM_BUILD_POOL='many'"):
        builders_wanted({"DEVICEFARM_BUILD_POOL": "many"})
    monkeypatch.setattr("delegate_runtime.host_cpus.usable_cpus", lambda: 16)
    assert builders_wanted({}) == 15
    monkeypatch.setattr("delegate_runtime.host_cpus.usable_cpus", lambda: 64)
    assert builders_wanted({}) == 15  # the session builds too: 16, the switches' max_build_jobs


def test_the_first_tiers_warm_up_is_asked_for_by_its_setting():
    assert warm_tier({}) and warm_tier({"DEVICEFARM_WARM_TIER": "1"})  # on by default
    assert not warm_tier({"DEVICEFARM_WARM_TIER": "0"})
    with pytest.raises(ValueError, match="DEVICEFARM_WARM_TIER='yes': expected 0 or 1"):
        warm_tier({"DEVICEFARM_WARM_TIER": "yes"})


def test_a_pool_that_cannot_start_is_reported_and_left_out(monkeypatch, tmp_path):
    """Device 9:9 exists nowhere: its builders die at start; the agent says so and goes on
    (its sessions start their own build workers, as without a pool)."""
    pytest.importorskip("pyopencl")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DEVICEFARM_BUILD_POOL", "1")
    said: list[str] = []
    pools = BuildPools(said.append)
    pools.ensure([gpu("NVIDIA CUDA", "9:9"), gpu("Portable Computing Language")])
    assert len(said) == 1 and "no resident program builders" in said[0]
    assert "9:9 did not start" in said[0]
    pools.ensure([gpu("NVIDIA CUDA", "9:9")])  # not tried again on every round
    assert len(said) == 1
    pools.stop()
