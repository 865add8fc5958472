"""Parsing what phones and their tools print; profiles; the lab host's toolset."""

from __future__ import annotations

import json

import pytest

from delegate_runtime.errors import DeviceError, JobError
from delegate_runtime.tools.benchmark_parser import BenchmarkParseError
from worker_agent.android.diff_output import parse_diff_output
from worker_agent.android.facts import device_info, gles_api, parse_getprop, parse_gles
from worker_agent.android.simulator import load_profile
from worker_agent.android.simulator.fs import ENOSPC, FileSystem, FsError
from worker_agent.android.toolset import toolset_for

GETPROP = """[ro.product.manufacturer]: [samsung]
[ro.product.model]: [SM-S911B]
[ro.build.version.sdk]: [33]
[ro.soc.model]: [SM8550]
[persist.sys.multi]: [line one
line two]
[ro.hardware.egl]: [adreno]
"""


def test_getprop_lines() -> None:
    props = parse_getprop(GETPROP)
    assert props["ro.product.model"] == "SM-S911B" and props["ro.hardware.egl"] == "adreno"
    assert "persist.sys.multi" not in props  # a value over several lines is skipped


@pytest.mark.parametrize(
    "line, want",
    [
        ("GLES: ARM, Mali-G710, OpenGL ES 3.2 v1.r36p0-01eac0",
         ("ARM", "Mali-G710", "OpenGL ES 3.2 v1.r36p0-01eac0", "OpenGL ES 3.2")),
        ("GLES: Qualcomm, Adreno (TM) 640, OpenGL ES 3.2 V@415.0 (GIT@a1, I2, 1587)",
         ("Qualcomm", "Adreno (TM) 640", "OpenGL ES 3.2 V@415.0 (GIT@a1, I2, 1587)",
          "OpenGL ES 3.2")),
        ("  GLES: Imagination Technologies, PowerVR Rogue GE8320, OpenGL ES 3.2 build 1.13@5776728",
         ("Imagination Technologies", "PowerVR Rogue GE8320",
          "OpenGL ES 3.2 build 1.13@5776728", "OpenGL ES 3.2")),
    ],
)  # fmt: skip
def test_gles_line(line, want) -> None:
    g = parse_gles("Build configuration: [sf]\n" + line + "\nGL_EXT_debug_marker\n")
    assert (g["vendor"], g["renderer"], g["version"], gles_api(g["version"])) == want


POWERVR = (
    "ANGLE (Imagination Technologies, Vulkan 1.4.317 (PowerVR C-Series CXTP-48-1536 MC1 "
    "(0x70061042)), PowerVR C-Series Vulkan Driver 1.662.3024)"
)


@pytest.mark.parametrize(
    "line, want",
    [
        (f"GLES: Imagination Technologies, {POWERVR}, OpenGL ES 3.2.0 (ANGLE 2.1.24117 git hash: 1a2b)",
         ("Imagination Technologies", POWERVR, "OpenGL ES 3.2.0 (ANGLE 2.1.24117 git hash: 1a2b)")),
        ("GLES: Samsung Electronics Co., Ltd., ANGLE (Samsung Xclipse 920) on Vulkan 1.1.179, "
         "OpenGL ES 3.2 ANGLE git hash: 4e5c55ea0c4a",
         ("Samsung Electronics Co., Ltd.", "ANGLE (Samsung Xclipse 920) on Vulkan 1.1.179",
          "OpenGL ES 3.2 ANGLE git hash: 4e5c55ea0c4a")),
        # ANGLE on a GL backend names the GL version inside its parentheses
        ("GLES: Qualcomm, ANGLE (Qualcomm, Adreno (TM) 740, OpenGL ES 3.2), "
         "OpenGL ES 3.2 (ANGLE 2.1.0 git hash: 1a2b)",
         ("Qualcomm", "ANGLE (Qualcomm, Adreno (TM) 740, OpenGL ES 3.2)",
          "OpenGL ES 3.2 (ANGLE 2.1.0 git hash: 1a2b)")),
    ],
)  # fmt: skip
def test_gles_line_with_commas_in_the_renderer(line, want) -> None:
    g = parse_gles(line)
    assert (g["vendor"], g["renderer"], g["version"]) == want


def test_angle_phone_gets_litert_variables() -> None:
    from orchestrator.allowlist.facts import GLES_VERSION, GPU_MODEL, list_variables

    gles = parse_gles(f"GLES: Imagination Technologies, {POWERVR}, OpenGL ES 3.2.0 (ANGLE x)")
    d = device_info("P1", {"ro.build.version.sdk": "35"}, gles, "lab", "127.0.0.1:5037")
    v = list_variables(d.row())
    assert v[GPU_MODEL] == "angle_(powervr_c_series_cxtp_48_1536_mc1)"
    assert v[GLES_VERSION] == "3.2"


def test_device_info_from_facts() -> None:
    d = device_info(
        "R5CT",
        parse_getprop(GETPROP),
        parse_gles("GLES: Q, Adreno (TM) 740, OpenGL ES 3.2 V@1"),
        "lab",
        "127.0.0.1:5037",
    )
    assert d.key == "android:R5CT" and d.kind == "android" and d.android_sdk == 33
    assert (d.vendor, d.model, d.renderer, d.api_version) == (
        "samsung",
        "SM-S911B",
        "Adreno (TM) 740",
        "OpenGL ES 3.2",
    )
    assert d.facts["ro.soc.model"] == "SM8550" and d.facts["ro.board.platform"] == ""
    assert json.loads(d.to_json())["facts"]["adb_server"] == "127.0.0.1:5037"


def test_diff_output() -> None:
    text = (
        "INFO: Num evaluation runs: 50\n"
        "INFO: Reference run latency: avg=84364.2(us), std_dev=12525(us)\n"
        "INFO: Test run latency: avg=7281.64(us), std_dev=2089(us)\n"
        "INFO: OutputDiff[0]: avg_error=1.96277e-05, std_dev=6.95767e-06\n"
        "INFO: OutputDiff[1]: avg_error=0, std_dev=0\n"
    )
    d = parse_diff_output(text)
    assert d["num_runs"] == 50 and d["test_latency"]["avg_us"] == pytest.approx(7281.64)
    assert d["reference_latency"]["std_us"] == 12525
    assert [o["avg_error"] for o in d["outputs"]] == [pytest.approx(1.96277e-05), 0.0]
    assert d["log"] == text
    with pytest.raises(BenchmarkParseError):
        parse_diff_output("Segmentation fault\n")


def test_toolset_picks_the_first_abi_with_a_benchmark_model(tmp_path) -> None:
    (tmp_path / "armeabi-v7a").mkdir()
    (tmp_path / "armeabi-v7a" / "benchmark_model").write_bytes(b"v7")
    t = toolset_for(["arm64-v8a", "armeabi-v7a"], tmp_path)
    assert t.abi == "armeabi-v7a" and t.run_eval is None and t.benchmark_model.size == 2
    with pytest.raises(DeviceError, match="no benchmark_model for ABI x86_64"):
        toolset_for(["x86_64"], tmp_path)


def test_toolset_must_be_configured(monkeypatch) -> None:
    monkeypatch.delenv("DEVICEFARM_ANDROID_TOOLS", raising=False)
    with pytest.raises(DeviceError, match="DEVICEFARM_ANDROID_TOOLS"):
        toolset_for(["arm64-v8a"])


def test_profiles_from_files(tmp_path) -> None:
    (tmp_path / "p.yaml").write_text(
        "serial: y\nprops: {ro.product.model: Y, ro.build.version.sdk: 30}\nfaults: {slow_s: 2}\n"
    )
    p = load_profile(tmp_path / "p.yaml")
    assert p.props["ro.build.version.sdk"] == "30" and p.faults.slow_s == 2
    (tmp_path / "p.json").write_text(json.dumps({"serial": "j", "gles": {"renderer": "R"}}))
    assert load_profile(str(tmp_path / "p.json")).gles == {"renderer": "R"}
    with pytest.raises(JobError, match="unknown profile field"):
        load_profile({"serial": "x", "colour": "red"})
    with pytest.raises(JobError, match="unknown fault"):
        load_profile({"faults": {"explode": True}})
    with pytest.raises(JobError, match="neither a file nor a built-in"):
        load_profile("no-such-phone")


def test_filesystem_capacity_and_fault() -> None:
    free = {"n": None}
    fs = FileSystem(100, lambda: free["n"])
    fs.mkdir("/d", parents=True)
    fs.write("/d/a", b"x" * 60)
    with pytest.raises(FsError, match=ENOSPC):
        fs.write("/d/b", b"x" * 50)
    fs.write("/d/a", b"x" * 90)  # replacing a file counts only the growth
    free["n"] = 5
    with pytest.raises(FsError, match=ENOSPC):
        fs.write("/d/c", b"x" * 6)
    assert fs.listdir("/d") == ["a"]
