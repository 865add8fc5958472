"""Device selectors and run configurations."""

from __future__ import annotations

import pytest

from farm_core.configs import parse_configs, supports
from farm_core.selectors import parse_selector

NVIDIA = {
    "key": "opencl:nvidia:h200",
    "kind": "opencl",
    "vendor": "nvidia",
    "model": "NVIDIA H200",
    "driver_version": "535.104.05",
    "tags": ["lab1", "big"],
    "host": "h1",
    "renderer": "",
    "api_version": "OpenCL 3.0",
}
POCL = {
    "key": "opencl:pocl:pthread_amd_epyc",
    "kind": "opencl",
    "vendor": "pocl",
    "model": "pthread-AMD EPYC",
    "driver_version": "3.0-rc2",
    "tags": [],
    "host": "h2",
    "renderer": "",
    "api_version": "OpenCL 3.0",
}


@pytest.mark.parametrize(
    ("text", "nvidia", "pocl"),
    [
        ("all", True, True),
        ("kind=opencl", True, True),
        ("vendor=nvidia", True, False),
        ("vendor=nvidia|pocl", True, True),
        ("vendor!=nvidia", False, True),
        ("driver>=535", True, False),
        ("driver<=3.1", False, True),
        ("tag=lab1", True, False),
        ("opencl:pocl:*", False, True),
        ("key=opencl:nvidia:*,tag=big", True, False),
        ("model=*h200*", True, False),
        ("host=h2,kind=opencl", False, True),
        ("opencl:[!n]*", False, True),  # a glob's [!...] is no operator
    ],
)
def test_selector_matches(text: str, nvidia: bool, pocl: bool) -> None:
    selector, errors = parse_selector(text)
    assert errors == []
    assert (selector.matches(NVIDIA), selector.matches(POCL)) == (nvidia, pocl)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty device selector"),
        ("colour=red", "unknown selector field 'colour'"),
        ("vendor=", "has no value"),
        ("driver>=abc", "needs a version number"),
        ("kind=opencl,,", "empty term"),
        ("driver>>1", "bad selector term 'driver>>1': expected FIELD OP VALUE"),
        ("driver>1", "bad selector term 'driver>1': expected FIELD OP VALUE"),
        ("Kind=opencl", "bad selector term 'Kind=opencl': expected FIELD OP VALUE"),
        ("driver=>535", "bad selector term 'driver=>535': its value starts with '>'"),
        ("kind==opencl", "bad selector term 'kind==opencl': its value starts with '='"),
    ],
)
def test_selector_errors(text: str, needle: str) -> None:
    selector, errors = parse_selector(text)
    assert selector is None
    assert any(needle in e for e in errors), errors


def test_selector_collects_every_error() -> None:
    _, errors = parse_selector("colour=red,size=big")
    assert len(errors) == 2


def test_configs_parse_and_collect_errors() -> None:
    configs, errors = parse_configs("cpu,gpu-fp16")
    assert [c.name for c in configs] == ["cpu", "gpu-fp16"] and errors == []
    assert configs[1].use_gpu and configs[1].precision == "fp16"
    _, errors = parse_configs("cpu,cpu,gpu-fp64,")
    assert any("given twice" in e for e in errors)
    assert any("unknown configuration 'gpu-fp64'" in e for e in errors)
    assert parse_configs("")[1] == [parse_configs("")[1][0]]


@pytest.mark.parametrize(
    ("kind", "config", "ok"),
    [
        ("cpu", "cpu", True),
        ("cpu", "gpu-fp32", False),
        ("opencl", "gpu-fp16", True),
        ("opencl", "cpu", False),
        ("android", "cpu", True),
        ("martian", "cpu", False),
    ],
)
def test_which_kinds_run_which_configs(kind: str, config: str, ok: bool) -> None:
    got, why = supports(kind, config)
    assert got == ok and (ok or why)


def _phone(driver: str, renderer: str, gles_vendor: str, sdk: int, abi: str) -> dict:
    """A phone's device row as facts.device_info registers it (driver: the GLES version)."""
    return {
        "key": f"android:{renderer}",
        "kind": "android",
        "vendor": "samsung",
        "model": "SM-X",
        "driver_version": driver,
        "renderer": renderer,
        "api_version": "OpenGL ES 3.2",
        "android_sdk": sdk,
        "tags": [],
        "host": "lab",
        "facts": {"gles_vendor": gles_vendor, "ro.product.cpu.abi": abi},
    }


MALI = _phone("OpenGL ES 3.2 v1.r36p0-01eac0.2819f9d4", "Mali-G710", "ARM", 33, "arm64-v8a")
ADRENO = _phone("OpenGL ES 3.2 V@0676.0 (GIT@1f7f8d4, I3a1b, 1692338823)", "Adreno (TM) 740",
                "Qualcomm", 34, "arm64-v8a")  # fmt: skip
ADRENO_OLD = _phone("OpenGL ES 3.2 V@415.0 (GIT@663be55, I724753c5e3)", "Adreno (TM) 540",
                    "Qualcomm", 28, "armeabi-v7a")  # fmt: skip
MESA = {**POCL, "key": "opencl:mesa", "vendor": "Mesa", "driver_version": "Mesa 24.2.1"}
NVIDIA_580 = {**NVIDIA, "driver_version": "580.159"}


@pytest.mark.parametrize(
    ("text", "device", "hit"),
    [
        # Mali: the release number, not the GLES version's 3.2 (was: (3, 2, 1, 36) >= (1, 99))
        ("driver>=v1.r99", MALI, False),
        ("driver>=v1.r36", MALI, True),
        ("driver>=v1.r36p1", MALI, False),
        ("driver<=v1.r36", MALI, True),
        ("driver<=r35", MALI, False),
        ("driver>=r30p0", MALI, True),
        # a Mali value says nothing of other families' drivers
        ("driver>=v1.r1", ADRENO, False),
        ("driver>=v1.r1", NVIDIA, False),
        # Adreno: V@0676.0, and 512.676 is the same driver in Vulkan's spelling
        ("driver>=V@0600", ADRENO, True),
        ("driver>=V@0700", ADRENO, False),
        ("driver>=512.676", ADRENO, True),
        ("driver>=512.677", ADRENO, False),
        ("driver>=676", ADRENO, True),
        ("driver>=V@0500", ADRENO_OLD, False),
        ("driver<=V@0415.0", ADRENO_OLD, True),
        ("driver>=V@0600", MALI, False),
        # NVIDIA and Mesa: their own dotted numbers
        ("driver>=580.100", NVIDIA_580, True),
        ("driver>=580.160", NVIDIA_580, False),
        ("driver<=535", NVIDIA, True),
        ("driver>=24.2", MESA, True),
        ("driver>=24.3", MESA, False),
        ("driver<=24", MESA, True),
    ],
)
def test_driver_versions_in_vendor_notation(text: str, device: dict, hit: bool) -> None:
    selector, errors = parse_selector(text)
    assert errors == []
    assert selector.matches(device) is hit


@pytest.mark.parametrize(
    ("text", "mali", "adreno", "adreno_old", "nvidia"),
    [
        ("sdk>=33", True, True, False, False),
        ("sdk>=34", False, True, False, False),
        ("sdk<=28", False, False, True, False),
        ("sdk=33", True, False, False, False),
        ("abi=arm64-v8a", True, True, False, False),
        ("abi=armeabi*", False, False, True, False),
        ("abi!=arm64-v8a", False, False, True, True),
        ("kind=android,sdk>=30,abi=arm64-v8a", True, True, False, False),
    ],
)
def test_sdk_and_abi_fields(
    text: str, mali: bool, adreno: bool, adreno_old: bool, nvidia: bool
) -> None:
    selector, errors = parse_selector(text)
    assert errors == []
    got = tuple(selector.matches(d) for d in (MALI, ADRENO, ADRENO_OLD, NVIDIA))
    assert got == (mali, adreno, adreno_old, nvidia)


@pytest.mark.parametrize("text", ["sdk>=thirty", "driver>=new"])
def test_version_terms_need_numbers(text: str) -> None:
    selector, errors = parse_selector(text)
    assert selector is None and any("needs a version number" in e for e in errors), errors
