"""Facts as LiteRT sees them: CanonicalizeValueWithKey (its own test cases,
canonicalize_value_test.cc), the SoC model from ro.board.platform (variables.h), and no-op
test devices kept out of lists."""

from __future__ import annotations

import pytest

from orchestrator.allowlist.canonical import canonical_value, canonical_value_with_key
from orchestrator.allowlist.facts import GPU_MODEL, SOC_MODEL, list_variables
from orchestrator.allowlist.reader import evaluate
from orchestrator.allowlist.tree import STATUS, Edge, Node


@pytest.mark.parametrize(
    "renderer, want",
    [
        ("ANGLE (Samsung Xclipse 920) on Vulkan 1.1.179", "angle_(samsung_xclipse_920)_on_vulkan"),
        ("ANGLE ((Samsung Xclipse 960) on Vulkan 1.4.304)", "angle_(samsung_xclipse_960)_on_vulkan"),
        ("ANGLE (Imagination Technologies, Vulkan 1.4.317 (PowerVR C-Series CXTP-48-1536 MC1 "
         "(0x70061042)), PowerVR C-Series Vulkan Driver 1.662.3024)",
         "angle_(powervr_c_series_cxtp_48_1536_mc1)"),
        ("ANGLE (Imagination Technologies, Vulkan 1.3.288 (PowerVR D-Series DXT-48-1536 MC1 "
         "(0x71061212)), PowerVR D-Series Vulkan Driver 1.602.400)",
         "angle_(powervr_d_series_dxt_48_1536_mc1)"),
        ("ANGLE (Intel, Vulkan 1.3.269 (VirtIO GPU Venus (Intel(R) Graphics (ADL N)) "
         "(0x000046d2)), Venus 24.2.8)",
         "angle_(virtio_gpu_venus_(intel(r)_graphics_(adl_n)))"),
        ("ANGLE (ARM, Vulkan 1.1.255 (VirtIO GPU Venus (Mali-G72) (0x62210030)), Venus 40.0.0)",
         "angle_(virtio_gpu_venus_(mali_g72))"),
        ("Adreno (TM) 640", "adreno_(tm)_640"),
        ("ANGLE (Qualcomm, Adreno (TM) 740, OpenGL ES 3.2)",
         "angle_(qualcomm,_adreno_(tm)_740,_opengl_es_3.2)"),
    ],
)  # fmt: skip
def test_gpu_model_as_litert_canonicalises_it(renderer: str, want: str) -> None:
    assert canonical_value_with_key(GPU_MODEL, renderer) == want


def test_only_gpu_model_is_reduced() -> None:
    xclipse = "ANGLE (Samsung Xclipse 920) on Vulkan 1.1.179"
    assert canonical_value_with_key(SOC_MODEL, xclipse) == canonical_value(xclipse)
    assert canonical_value("hElLo -x") == "hello__x"


@pytest.mark.parametrize("char", [chr(c) for c in range(1, 65) if chr(c) not in " -"])
def test_other_characters_are_kept(char: str) -> None:
    assert canonical_value(char) == char


def test_an_xclipse_phone_matches_its_reduced_entry() -> None:
    roots = [
        Node(GPU_MODEL, items=[Edge("angle_(samsung_xclipse_920)_on_vulkan",
                                    derived_properties=[(STATUS, "SUPPORTED")])])
    ]  # fmt: skip
    got = evaluate(roots, {GPU_MODEL: "ANGLE (Samsung Xclipse 920) on Vulkan 1.3.231"})
    assert got[STATUS] == "SUPPORTED"


def test_phone_variables_reduce_the_angle_renderer() -> None:
    phone = {"kind": "android", "renderer": "ANGLE (Samsung Xclipse 920) on Vulkan 1.1.179"}
    assert list_variables(phone)[GPU_MODEL] == "angle_(samsung_xclipse_920)_on_vulkan"


def test_soc_model_is_ro_board_platform() -> None:
    phone = {
        "kind": "android",
        "renderer": "Adreno (TM) 506",
        "facts": {"ro.board.platform": "sdm450", "ro.soc.model": "SDM450"},
    }
    assert list_variables(phone)[SOC_MODEL] == "sdm450"
    no_platform = {"kind": "android", "renderer": "X", "facts": {"ro.soc.model": "SM8550"}}
    assert SOC_MODEL not in list_variables(no_platform)


def test_noop_devices_have_no_list_variables() -> None:
    assert list_variables({"kind": "noop", "model": "fast", "renderer": "noop"}) == {}
