"""The configuration record and its fingerprint (delegate_runtime.tools.config_record)."""

from __future__ import annotations

import pytest

from delegate_runtime.gpu.switches import KNOBS, LAYOUT, Switches
from delegate_runtime.tools import config_record as cr

pytest.importorskip("pyopencl")  # the GPU delegate's modules


class FakeGpuSession:
    """The attributes a GpuSession exposes about the path it took."""

    class options:  # noqa: N801 - as GpuSession.options reads
        profiling = False

    launch_loop = "c"
    host_edges = True
    specialized_kernels = 23
    half_weights = False
    persistent_runs = (40, 2)
    program_from_cache = False


def test_every_switch_is_recorded_with_its_default_source(monkeypatch):
    for knob in KNOBS.values():
        if knob.env:
            monkeypatch.delenv(knob.env, raising=False)
    record = cr.configuration({"precision": "fp32"}, FakeGpuSession())
    assert record["gpu.persistent"] == {"value": True, "source": "default"}
    assert record["gpu.specialize"] == {"value": True, "source": "default"}
    assert record["gpu.persistent.GROUPS_PER_CU"]["source"] == "default"
    assert record["option.precision"] == {"value": "fp32", "source": "option"}
    assert record["gpu.session.persistent_kernels"] == {"value": 2, "source": "session"}
    assert record["gpu.session.launch_loop"]["value"] == "c"
    recorded = [k.record for k in KNOBS.values() if k.record and k.record.count(".") == 2]
    constants = len(recorded) + len(LAYOUT)
    assert sum(k.count(".") == 2 and k.split(".")[2].isupper() for k in record) == constants


def test_an_environment_switch_is_recorded_as_env_and_changes_the_fingerprint(monkeypatch):
    monkeypatch.delenv("DEVICEFARM_GPU_PERSISTENT", raising=False)
    plain = cr.configuration({}, FakeGpuSession())
    monkeypatch.setenv("DEVICEFARM_GPU_PERSISTENT", "0")
    off = cr.configuration({}, FakeGpuSession())
    assert off["gpu.persistent"] == {"value": False, "source": "env"}
    assert cr.fingerprint(off) != cr.fingerprint(plain)


def test_the_same_value_from_another_source_keeps_the_fingerprint(monkeypatch):
    monkeypatch.delenv("DEVICEFARM_GPU_HOST_EDGES", raising=False)
    plain = cr.configuration({}, FakeGpuSession())
    monkeypatch.setenv("DEVICEFARM_GPU_HOST_EDGES", "1")  # the default, said explicitly
    said = cr.configuration({}, FakeGpuSession())
    assert said["gpu.host_edges"]["source"] == "env"
    assert cr.fingerprint(said) == cr.fingerprint(plain)


def test_a_switch_a_caller_set_is_an_override():
    """The record is the session's switches: one made with a switch changed records it."""
    before = cr.configuration({}, FakeGpuSession())
    session = FakeGpuSession()
    session.switches = Switches.from_env().replace(persistent_groups_per_cu=3)
    after = cr.configuration({}, session)
    assert after["gpu.persistent.GROUPS_PER_CU"] == {"value": 3, "source": "override"}
    assert cr.fingerprint(after) != cr.fingerprint(before)


def test_a_layout_constant_changed_in_process_is_an_override(monkeypatch):
    from delegate_runtime.gpu.opencl import persistent

    before = cr.configuration({}, FakeGpuSession())
    monkeypatch.setattr(persistent, "GROUP_ITEMS", 128)
    after = cr.configuration({}, FakeGpuSession())
    assert after["gpu.persistent.GROUP_ITEMS"] == {"value": 128, "source": "override"}
    assert cr.fingerprint(after) != cr.fingerprint(before)


def test_a_warm_kernel_cache_does_not_change_the_fingerprint():
    cold = cr.configuration({}, FakeGpuSession())
    warm_session = FakeGpuSession()
    warm_session.program_from_cache = True
    warm = cr.configuration({}, warm_session)
    assert warm != cold
    assert cr.fingerprint(warm) == cr.fingerprint(cold)


def test_a_profiling_session_has_another_fingerprint():
    shipped = cr.configuration({}, FakeGpuSession())
    profiling = FakeGpuSession()
    profiling.options = type("o", (), {"profiling": True})
    assert cr.fingerprint(cr.configuration({}, profiling)) != cr.fingerprint(shipped)


def test_the_cpu_reference_records_no_gpu_switches(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    record = cr.configuration({"use_gpu": False}, object())
    assert not any(k.startswith("gpu.") for k in record)
    assert record["cpu.OMP_NUM_THREADS"] == {"value": "1", "source": "env"}
    assert len(cr.fingerprint(record)) == 16


def test_another_models_kernel_counts_keep_the_fingerprint():
    """A new version of a model (other kernels) stays comparable with its lineage; a path
    without persistent kernels does not."""
    first = cr.configuration({}, FakeGpuSession())
    other = FakeGpuSession()
    other.specialized_kernels, other.persistent_runs = 31, (55, 3)
    assert cr.fingerprint(cr.configuration({}, other)) == cr.fingerprint(first)
    none = FakeGpuSession()
    none.persistent_runs = (0, 0)
    assert cr.fingerprint(cr.configuration({}, none)) != cr.fingerprint(first)


def test_a_constant_added_later_joins_the_fingerprint_only_when_set(monkeypatch):
    """persistent.MAX_RUN_BYTES came after results were stored: off (None), it leaves the
    fingerprint as it was before it existed; at its default or any other value, it
    changes it."""
    record = cr.configuration({}, FakeGpuSession())
    assert record["gpu.persistent.MAX_RUN_BYTES"] == {"value": 64_000, "source": "default"}
    session = FakeGpuSession()
    session.switches = Switches.from_env().replace(persistent_max_run_bytes=None)
    off = cr.configuration({}, session)
    assert off["gpu.persistent.MAX_RUN_BYTES"] == {"value": None, "source": "override"}
    before = {k: v for k, v in off.items() if k != "gpu.persistent.MAX_RUN_BYTES"}
    assert cr.fingerprint(off) == cr.fingerprint(before)
    assert cr.fingerprint(record) != cr.fingerprint(off)


def test_a_retired_switch_is_not_recorded_and_keeps_the_fingerprint():
    """Switches deleted with their variants are no longer listed; the fingerprint hashes
    each as its one value, so records stored before the deletion, which listed it at that
    value, keep theirs, and those that listed another value differ."""
    record = cr.configuration({}, FakeGpuSession())
    assert not set(cr.RETIRED) & set(record)
    stored = record | {k: {"value": v, "source": "default"} for k, v in cr.RETIRED.items()}
    assert cr.fingerprint(stored) == cr.fingerprint(record)
    flipped = stored | {"gpu.host_copy.STREAMING": {"value": True, "source": "override"}}
    assert cr.fingerprint(flipped) != cr.fingerprint(record)
    cpu = cr.configuration({"use_gpu": False}, object())
    assert cr.fingerprint(cpu) == cr.fingerprint(
        {k: v for k, v in cpu.items() if k not in cr.RETIRED}
    )


def test_the_build_constants_are_recorded_outside_the_fingerprint():
    """How the program was built (workers, jobs) changes init, not what is timed."""
    plain = cr.configuration({}, FakeGpuSession())
    session = FakeGpuSession()
    session.switches = Switches.from_env().replace(max_build_workers=2, max_build_jobs=4)
    fewer = cr.configuration({}, session)
    assert fewer["gpu.build.MAX_WORKERS"] == {"value": 2, "source": "override"}
    assert cr.fingerprint(fewer) == cr.fingerprint(plain)


def test_a_constant_recorded_later_joins_the_fingerprint_only_when_changed():
    """reduce's threshold had 256 before it was recorded: at 256 the fingerprint is the one
    results stored before had; any other value changes it."""
    plain = cr.configuration({}, FakeGpuSession())
    before = {k: v for k, v in plain.items() if k != "gpu.reduce.WIDE_FROM"}
    assert cr.fingerprint(plain) == cr.fingerprint(before)
    session = FakeGpuSession()
    session.switches = Switches.from_env().replace(reduce_wide_from=64)
    assert cr.fingerprint(cr.configuration({}, session)) != cr.fingerprint(plain)
