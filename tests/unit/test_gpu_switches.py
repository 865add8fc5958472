"""The GPU delegate's switchboard (delegate_runtime/gpu/switches.py): each switch declared
once, read from the environment with clear errors, changed only by replace(), and
recorded under the names results have always stored."""

from __future__ import annotations

import dataclasses

import pytest

from delegate_runtime.errors import UsageError
from delegate_runtime.gpu.switches import (
    DEFAULTS,
    KNOBS,
    PLAIN,
    Switches,
    by_record_name,
    parse_setting,
)

#: The record's entries of the shipped switches, as results stored them before the
#: switchboard (the fusions' rules and the squeeze-excite kernel's limits as their modules'
#: constants; three build constants, reduce's threshold and the passes' switches recorded
#: since, outside the fingerprint at these values): a rename or a new default here
#: changes every result's fingerprint.
SHIPPED_RECORD = {
    "gpu.specialize": True,
    "gpu.persistent": True,
    "gpu.host_edges": True,
    "gpu.native_loop": True,
    "gpu.fold": True,
    "gpu.fuse": True,
    "gpu.fusions_off": [],
    "gpu.concat_views": True,
    "gpu.hot_path": True,
    "gpu.pinned": True,
    "gpu.placement.MIN_WORK": 5_000_000,  # new: not fingerprinted (config_record.py)
    "gpu.cpu_threads.MIN_POOL_TO_TRY": 8,  # likewise
    "gpu.persistent.GROUPS_PER_CU": 2,
    "gpu.persistent.GROUPS": None,
    "gpu.persistent.MIN_LAYERS": 2,
    "gpu.persistent.MAX_RUN_BYTES": 64_000,
    "gpu.persistent.CHECK_SPINS": 1 << 18,
    "gpu.persistent.RUN_SPINS": 1 << 30,
    "gpu.host_copy.MIN_BYTES": 128 * 1024,
    "gpu.host_copy.CHUNK_BYTES": 32 * 1024,
    "gpu.host_copy.SPIN_US": 500,
    "gpu.lowering.MIN_SPLIT_STEPS": 5,
    "gpu.lowering.MIN_STEPS_PER_SPLIT": 2,
    "gpu.lowering.MIN_COMPUTED_SPLIT_K": 32,
    "gpu.lowering.GEMM_GROUPS_PER_CU": 4,
    "gpu.lowering.DEPTHWISE_SMALL_TILE_GROUPS_PER_CU": 1.6,
    "gpu.executor.FLUSH_EVERY": 6,
    "gpu.conv.PATCH_GEMM_MIN_N": 24,
    "gpu.conv.PATCH_GEMM_MIN_K": 128,
    "gpu.mean.WIDE_FROM": 64,
    "gpu.fold.MAX_FOLDED_ELEMENTS": 1 << 24,
    "gpu.reduce.WIDE_FROM": 256,
    "gpu.fusion.DEPTHWISE_MAX_READER_CHANNELS": 128,
    "gpu.fusion.DEPTHWISE_MAX_GEMM_MACS": 5_000_000,
    "gpu.fusion.DEPTHWISE_SMALL_MAP_PIXELS": 64,
    "gpu.fusion.DEPTHWISE_SMALL_MAP_CHANNELS": 256,
    "gpu.fusion.DEPTHWISE_ALIGNED": 4,
    "gpu.fusion.MEAN_MAX_READER_CHANNELS": 256,
    "gpu.squeeze_excite.MAX_WEIGHTS": 50_000,
    "gpu.squeeze_excite.DW_MAX_CHANNELS": 512,
    "gpu.squeeze_excite.DW_GROUPS_PER_CU": 4,
    "gpu.squeeze_excite.DW_TAIL_LOADS": 64,
    "gpu.build.FIRST_TIER": True,
    "gpu.build.MAX_JOBS": 16,
    "gpu.build.MAX_WORKERS": 9,
    "gpu.build.WORKER_TIMEOUT_S": 600.0,
}


def test_the_shipped_switches_record_as_results_always_stored_them():
    record = DEFAULTS.record()
    assert {k: v["value"] for k, v in record.items()} == SHIPPED_RECORD
    assert {v["source"] for v in record.values()} == {"default"}


def test_every_field_has_its_knob_with_a_meaning():
    fields = {f.name for f in dataclasses.fields(Switches)} - {"sources"}
    assert set(KNOBS) == fields
    assert all(knob.meaning for knob in KNOBS.values())


def test_the_environment_sets_switches_as_env():
    switches = Switches.from_env(
        {"DEVICEFARM_GPU_PERSISTENT": "0", "DEVICEFARM_GPU_COPY_HELPERS": " 2 "}
    )
    assert switches.persistent is False and switches.copy_helpers == 2
    assert switches.source("persistent") == "env" and switches.explicit("persistent") is False
    assert switches.source("host_edges") == "default" and switches.explicit("host_edges") is None
    assert Switches.from_env({"DEVICEFARM_GPU_SPECIALIZE": ""}) == DEFAULTS  # blank: unset


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DEVICEFARM_GPU_PERSISTENT", "yes", r"DEVICEFARM_GPU_PERSISTENT must be 0 \(off\) or 1"),
        ("DEVICEFARM_NATIVE_LOOP", "2", r"DEVICEFARM_NATIVE_LOOP must be 0 \(off\) or 1"),
        ("DEVICEFARM_GPU_COPY_HELPERS", "16", r"whole number of threads from 0 to 15, not '16'"),
        ("DEVICEFARM_GPU_COPY_HELPER_BUDGET", "-3", r"whole number of threads from 0, not '-3'"),
    ],
)
def test_a_value_a_switch_cannot_take_is_a_usage_error(variable, value, message):
    with pytest.raises(UsageError, match=message):
        Switches.from_env({variable: value})


def test_replace_marks_overrides_and_a_default_again_is_the_default():
    changed = DEFAULTS.replace(persistent_max_run_bytes=None, flush_every=6)
    assert changed.record()["gpu.persistent.MAX_RUN_BYTES"] == {"value": None, "source": "override"}
    assert changed.source("flush_every") == "default"
    back = changed.replace(persistent_max_run_bytes=64_000)
    assert back.source("persistent_max_run_bytes") == "default" and back == DEFAULTS
    with pytest.raises(ValueError, match="no switch no_such"):
        DEFAULTS.replace(no_such=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.flush_every = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        changed.sources["flush_every"] = "override"  # type: ignore[index]
    forced = Switches.from_env({"DEVICEFARM_GPU_SPECIALIZE": "1"}).replace(specialize=True)
    assert forced.explicit("specialize") is True  # the value it had: still the variable's


def test_switches_are_found_by_record_name_and_old_module_paths():
    assert by_record_name("gpu.persistent.MAX_RUN_BYTES") == "persistent_max_run_bytes"
    assert by_record_name("persistent.MAX_RUN_BYTES") == "persistent_max_run_bytes"
    assert by_record_name("flush_every") == "flush_every"
    assert parse_setting("opencl.records.conv.PATCH_GEMM_MIN_N=8") == ("patch_gemm_min_n", 8)
    assert parse_setting("opencl.lowering.GEMM_GROUPS_PER_CU=1") == ("gemm_groups_per_cu", 1)
    assert parse_setting("host_edges=False") == ("host_edges", False)
    fusion = "opencl.fusions.depthwise_into_gemm.DEPTHWISE_ALIGNED=1"
    assert parse_setting(fusion) == ("depthwise_aligned", 1)
    assert parse_setting("opencl.fusion.DEPTHWISE_MAX_GEMM_MACS=7") == (
        "depthwise_max_gemm_macs",
        7,
    )
    assert parse_setting("squeeze_excite.MAX_WEIGHTS=0") == ("squeeze_excite_max_weights", 0)
    assert parse_setting("fusions.mean_into_gemm.MEAN_MAX_READER_CHANNELS=8") == (
        "mean_max_reader_channels",
        8,
    )
    with pytest.raises(KeyError):
        parse_setting("fusion.MAX_STEPS=3")  # the epilogue's steps: layout, no switch
    with pytest.raises(ValueError, match="no Python literal"):
        parse_setting("flush_every=six")


def test_plain_turns_every_fast_path_off_and_says_so():
    """plain(): each pass with a switch off (gpu/passes.py) but constant folding, which
    decides what the GPU takes rather than how fast it runs; each recorded as an override."""
    from delegate_runtime.gpu.passes import PASSES, passes_on

    plain = Switches.plain()
    assert passes_on(plain) == [p.name for p in PASSES if p.switch in (None, "fold")]
    assert all(plain.source(name) == "override" for name in PLAIN)
    assert plain.record()["gpu.fuse"] == {"value": False, "source": "override"}
    assert passes_on(DEFAULTS) == [p.name for p in PASSES]
    assert all(p.switch is None or p.switch in KNOBS for p in PASSES)


def test_the_passes_and_the_compiler_are_read_from_the_environment():
    switches = Switches.from_env(
        {"DEVICEFARM_GPU_FUSIONS_OFF": "swish, epilogue", "DEVICEFARM_GPU_FUSE": "0", "CC": "gcc"}
    )
    assert switches.fusions_off == frozenset({"swish", "epilogue"}) and not switches.fuse
    assert switches.cc == "gcc" and switches.source("cc") == "env"
    assert switches.record()["gpu.fusions_off"]["value"] == ["epilogue", "swish"]
    assert parse_setting("fusions_off={'swish'}") == ("fusions_off", {"swish"})
    assert DEFAULTS.replace(fusions_off={"swish"}).fusions_off == frozenset({"swish"})


#: copy_helpers is recorded as the helper plan it makes on this host (config_record)
@pytest.mark.parametrize("name", sorted(set(PLAIN) - {"copy_helpers"}))
def test_a_pass_turned_off_changes_the_fingerprint(name):
    """Recorded since the switchboard, the passes' switches join the fingerprint only
    when changed (config_record.FINGERPRINTED_WHEN_CHANGED), so a result with one off is
    never compared with the shipped path's."""
    pytest.importorskip("pyopencl")
    from delegate_runtime.tools import config_record as cr

    shipped = cr.gpu_switches(DEFAULTS)
    changed = cr.gpu_switches(DEFAULTS.replace(**{name: PLAIN[name]}))
    assert cr.fingerprint(changed) != cr.fingerprint(shipped)


@pytest.mark.parametrize("name", ["depthwise_aligned", "squeeze_excite_max_weights"])
def test_a_fusion_limit_set_as_a_switch_is_recorded_and_fingerprinted(name):
    """The fusions' rules and the squeeze-excite kernel's limits, once module constants
    (always fingerprinted), are switches recorded under the same names and values."""
    pytest.importorskip("pyopencl")
    from delegate_runtime.tools import config_record as cr

    record = KNOBS[name].record
    shipped = cr.gpu_switches(DEFAULTS)
    changed = cr.gpu_switches(DEFAULTS.replace(**{name: 1}))
    assert changed[record] == {"value": 1, "source": "override"}
    assert shipped[record]["source"] == "default"
    assert cr.fingerprint(changed) != cr.fingerprint(shipped)
