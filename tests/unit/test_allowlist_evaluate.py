"""`allowlist evaluate` and `allowlist merge` on LiteRT's own lists: the sample list of
LiteRT's gpu_compatibility_test.cc and the shipped gpu_compatibility.bin (../shared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.allowlist import devicedb, evaluate, merge, reader
from orchestrator.allowlist.collect import Allowlist, Entry
from orchestrator.allowlist.export import render
from orchestrator.allowlist.rules import (
    CRASHED,
    SUPPORTED,
    UNKNOWN,
    UNSUPPORTED,
    Decision,
    Thresholds,
)
from orchestrator.allowlist.tree import STATUS
from tests.conftest import require

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference"
SHIPPED = REFERENCE / "gpu_compatibility.bin"
SAMPLE = REFERENCE / "devicedb-sample.json"
OK = Decision(SUPPORTED, config="gpu-fp32", precision="fp32", enable_quant=True, speedup=2.0)
BAD = Decision(UNSUPPORTED, CRASHED, "gpu-fp32: crashed")


def _last_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert evaluate.main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()[-1]


# LiteRT's gpu_compatibility_test.cc, on the list it loads (devicedb-sample).
@pytest.mark.parametrize(
    "facts, want",
    [
        ("tflite.device_model=M712C,tflite.android_sdk_version=24,tflite.opengl_es_version=3.1",
         "SUPPORTED"),
        ("tflite.device_model=shiraz-ag-2011,tflite.android_sdk_version=28", "UNSUPPORTED"),
        ("tflite.device_model=mag2016,tflite.android_sdk_version=26,tflite.opengl_es_version=3.1",
         "UNKNOWN"),
        ("tflite.android_sdk_version=28,tflite.device_model=SM-G960F,tflite.device_name=starlte,"
         "tflite.manufacturer=Samsung,tflite.gpu_model=Mali-G72,tflite.opengl_es_version=3.2",
         "UNKNOWN"),  # ReturnsUnsupportedForFullMatch: Includes() is false
    ],
)  # fmt: skip
def test_litert_tests_on_the_sample_list(capsys, facts: str, want: str) -> None:
    require(SAMPLE.exists(), f"LiteRT's devicedb-sample.json in {REFERENCE}")
    assert _last_line(capsys, [str(SAMPLE), "--facts", facts]) == want


# The shipped list does not hold those three test devices (LiteRT tests them on the sample
# list); what it does hold, it answers.
@pytest.mark.parametrize(
    "facts, want",
    [
        ("tflite.device_model=M712C,tflite.android_sdk_version=24,tflite.opengl_es_version=3.1",
         "UNKNOWN"),
        ("tflite.device_model=shiraz-ag-2011,tflite.android_sdk_version=28", "UNKNOWN"),
        ("tflite.device_model=mag2016,tflite.android_sdk_version=26,tflite.opengl_es_version=3.1",
         "UNKNOWN"),
        ("tflite.gpu_model=Adreno (TM) 640,tflite.android_sdk_version=30,"
         "tflite.opengl_es_version=3.2", "SUPPORTED"),
        ("tflite.gpu_model=Adreno (TM) 640,tflite.android_sdk_version=28", "UNKNOWN"),
        ("tflite.opengl_es_version=3.0,tflite.android_sdk_version=30", "UNSUPPORTED"),
        ("tflite.device_model=A5 Pro,tflite.android_sdk_version=28", "UNSUPPORTED"),
    ],
)  # fmt: skip
def test_the_shipped_list(capsys, facts: str, want: str) -> None:
    require(SHIPPED.exists(), f"LiteRT's gpu_compatibility.bin in {REFERENCE}")
    assert _last_line(capsys, [str(SHIPPED), "--facts", facts]) == want


def test_facts_may_hold_commas() -> None:
    facts = evaluate.parse_facts(
        ["tflite.gpu_model=ANGLE (Imagination Technologies, Vulkan 1.4.317 (PowerVR X)),"
         "tflite.opengl_es_version=3.2"]
    )  # fmt: skip
    assert facts == {
        "tflite.gpu_model": "ANGLE (Imagination Technologies, Vulkan 1.4.317 (PowerVR X))",
        "tflite.opengl_es_version": "3.2",
    }


@pytest.mark.parametrize("argv", [["--facts", "nonsense"], ["--facts", "a=1,a=2"], []])
def test_bad_facts_are_refused(capsys, tmp_path: Path, argv: list[str]) -> None:
    lst = tmp_path / "l.bin"
    lst.write_bytes(devicedb.encode([]))
    assert evaluate.main([str(lst), *argv]) == 2
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.parametrize("data", [b"", b"\xff\xff\xff\x7f", b"{not json"])
def test_a_broken_list_is_refused(capsys, tmp_path: Path, data: bytes) -> None:
    lst = tmp_path / "broken.bin"
    lst.write_bytes(data)
    assert evaluate.main([str(lst), "--facts", "tflite.device_model=x"]) == 2
    assert "error: " in capsys.readouterr().err


def _ours() -> list:
    adreno = {"tflite.gpu_model": "adreno_(tm)_640", "tflite.opengl_es_version": "3.2"}
    return devicedb.build_tree(
        [
            (adreno | {"tflite.android_sdk_version": "30",
                       "tflite.opengl_driver_version": "v@415.0"}, BAD),
            ({"tflite.gpu_model": "mali_g710", "tflite.android_sdk_version": "33"}, OK),
        ]
    )  # fmt: skip


def test_merged_list_keeps_shipped_rules_under_our_decisions(tmp_path: Path) -> None:
    require(SHIPPED.exists(), f"LiteRT's gpu_compatibility.bin in {REFERENCE}")
    ours = tmp_path / "ours.bin"
    ours.write_bytes(devicedb.encode(_ours()))
    out = tmp_path / "merged.bin"
    assert merge.main([str(ours), "--base", str(SHIPPED), "--out", str(out)]) == 0
    roots = devicedb.decode(out.read_bytes())
    adreno = {"tflite.gpu_model": "Adreno (TM) 640", "tflite.opengl_es_version": "3.2"}
    # ours: measured crash on that driver (and, without a driver, the conservative answer)
    assert reader.status(roots, adreno | {"tflite.android_sdk_version": "30"}) == UNSUPPORTED
    driver = {"tflite.android_sdk_version": "30", "tflite.opengl_driver_version": "V@415.0"}
    assert reader.status(roots, adreno | driver) == UNSUPPORTED
    # a driver we never measured: the shipped list's answer, not ours and not wiped
    other = driver | {"tflite.opengl_driver_version": "V@500.0"}
    assert reader.status(roots, adreno | other) == SUPPORTED
    assert reader.status(roots, {"tflite.gpu_model": "Mali-G710",
                                 "tflite.android_sdk_version": "34"}) == SUPPORTED  # fmt: skip
    # the shipped list's own decisions where we measured nothing
    assert reader.status(roots, {"tflite.device_model": "a5_pro",
                                 "tflite.android_sdk_version": "28"}) == UNSUPPORTED  # fmt: skip
    shipped = devicedb.decode(SHIPPED.read_bytes())
    assert roots[: len(shipped)] == shipped


def test_merge_defers_unknown_to_the_base() -> None:
    base = devicedb.build_tree([({"tflite.gpu_model": "adreno_(tm)_640"}, OK)], False)
    ours = _ours()
    got = merge.merged(base, ours)
    v = {"tflite.gpu_model": "adreno_(tm)_640", "tflite.opengl_es_version": "3.2",
         "tflite.android_sdk_version": "30", "tflite.opengl_driver_version": "v@999"}  # fmt: skip
    assert reader.evaluate(ours, v)[STATUS] == "UNKNOWN"  # a driver nobody measured
    assert reader.status(got, v) == SUPPORTED  # the base list's answer
    measured = v | {"tflite.opengl_driver_version": "v@415.0"}
    assert reader.status(got, measured) == UNSUPPORTED


def test_noop_devices_never_appear_in_exports() -> None:
    noop = Entry({}, ["noop:fast"], ["noop:fast"], decision=OK)
    phone = Entry({"tflite.gpu_model": "mali_g710"}, ["android:p7"], ["android:p7"], decision=OK)
    allowlist = Allowlist("0" * 64, "m.tflite", Thresholds(), [noop, phone])
    for fmt in ("csv", "json", "devicedb-json"):
        text = render(allowlist, fmt).decode()
        assert "noop" not in text and "mali_g710" in text, fmt
    roots = devicedb.decode(render(allowlist, "devicedb-bin"))
    assert reader.status(roots, {}) == UNKNOWN


def test_devicefarm_allowlist_evaluate_command(capsys) -> None:
    from devicefarm.cli import main

    require(SAMPLE.exists(), f"LiteRT's devicedb-sample.json in {REFERENCE}")
    facts = "tflite.device_model=M712C,tflite.android_sdk_version=24,tflite.opengl_es_version=3.1"
    assert main(["allowlist", "evaluate", str(SAMPLE), "--facts", facts]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "SUPPORTED" and "tflite.soc_model=exynos_7872" in out
