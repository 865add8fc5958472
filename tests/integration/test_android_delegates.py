"""Every delegate a simulated phone offers, through the real adb server: discovery reads
what each phone has, the runner runs what applies with the official flags, refuses the
rest before anything reaches the phone, and the simulated benchmark_model fails as the
real one does when asked for an accelerator the phone lacks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from delegate_runtime.errors import JobError
from farm_core.configs import canonical, stored_config
from tests.support.farm import write_model
from worker_agent.android import adb, discovery
from worker_agent.android.runner import AdbRunner, ToolOutputError
from worker_agent.android.simulator import SimulatedPhone, load_profile
from worker_agent.runners.base import JobSpec

pytestmark = pytest.mark.integration

FAST = {"num_runs": 2, "warmup_runs": 1, "min_secs": 0.0, "max_secs": 5.0,
        "warmup_min_secs": 0.0, "diff_runs": 2, "cooldown_s": 0.0}  # fmt: skip


@pytest.fixture(autouse=True)
def _tools(tmp_path, monkeypatch) -> None:
    (tmp_path / "tools" / "arm64-v8a").mkdir(parents=True)
    for name in ("benchmark_model", "run_eval"):
        (tmp_path / "tools" / "arm64-v8a" / name).write_bytes(b"\x7fELF " + name.encode())
    monkeypatch.setenv("DEVICEFARM_ANDROID_TOOLS", str(tmp_path / "tools"))


@pytest.fixture
def phone(adb_server):
    phones: list[SimulatedPhone] = []
    server = adb.Server("127.0.0.1", adb_server.port)

    def make(profile: str) -> tuple[SimulatedPhone, AdbRunner]:
        ph = SimulatedPhone(load_profile(profile)).start()
        phones.append(ph)
        adb_server.connect(ph.serial)
        status = next(s for s in discovery.scan("lab", server) if s.serial == ph.serial)
        runner = AdbRunner(status.device)
        runner.setup()
        ph.commands.clear()
        return ph, runner

    yield make
    for ph in phones:
        ph.stop()
        adb_server.run("disconnect", ph.serial)


@pytest.fixture
def model(tmp_path) -> Path:
    return write_model(tmp_path / "m.tflite")


def _spec(path: Path, config: str) -> JobSpec:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return JobSpec(1, 1, path, sha, stored_config(canonical(config)), dict(FAST))


@pytest.mark.parametrize(
    ("profile", "facts"),
    [
        (
            "pixel-4",
            {
                "gpu_backends": ["cl", "gl"],
                "nnapi_devices": ["qti-default", "qti-dsp", "qti-gpu", "nnapi-reference"],
                "hexagon": {
                    "interface": "/vendor/lib64/libhexagon_interface.so",
                    "skel_dir": "/vendor/lib/rfsa/adsp",
                    "skel": [
                        "libhexagon_nn_skel.so",
                        "libhexagon_nn_skel_v65.so",
                        "libhexagon_nn_skel_v66.so",
                    ],
                },
                "cpu": {
                    "cores": 8,
                    "little": 4,
                    "big": 4,
                    "max_khz": [1785600] * 4 + [2419200] * 3 + [2841600],
                },  # fmt: skip
            },
        ),
        (
            "galaxy-a14",
            {
                "gpu_backends": ["gl"],
                "nnapi_devices": ["nnapi-reference"],
                "hexagon": {},
                "cpu": {
                    "cores": 8,
                    "little": 6,
                    "big": 2,
                    "max_khz": [1800000] * 6 + [2000000] * 2,
                },  # fmt: skip
            },
        ),
    ],
)
def test_discovery_reads_what_the_phone_offers(phone, profile: str, facts: dict) -> None:
    _, runner = phone(profile)
    assert runner.device.facts["accelerators"] == facts


@pytest.mark.parametrize(
    ("config", "flags", "delegate"),
    [
        ("hexagon", ["--use_hexagon=true", "--hexagon_lib_path=/vendor/lib/rfsa/adsp"], None),
        (
            "nnapi:accelerator=qti-dsp;fp16=true",
            ["--use_nnapi=true", "--nnapi_accelerator_name=qti-dsp", "--nnapi_allow_fp16=true"],
            "TfLiteNnapiDelegate",
        ),
        ("xnnpack:threads=2", ["--use_xnnpack=true", "--num_threads=2"], "TfLiteXNNPackDelegate"),
        ("gpu:backend=cl;precision=fp16", ["--use_gpu=true", "--gpu_backend=cl"], None),
    ],
)
def test_phone_with_hexagon_runs_each_delegate(phone, model, config, flags, delegate) -> None:
    ph, runner = phone("pixel-4")
    outcome = runner.run(_spec(model, config))
    argv = outcome.benchmark["tool"]["argv"]
    for f in flags:
        assert f in argv
    if delegate:
        assert outcome.delegation["delegate"] == delegate
        assert outcome.delegation["nodes_delegated"] >= 1
    assert outcome.benchmark["avg_us"] > 0


def test_float_model_is_not_taken_by_hexagon(phone, model) -> None:
    _, runner = phone("pixel-4")
    outcome = runner.run(_spec(model, "hexagon"))
    assert "Though Hexagon delegate is explicitly applied" in outcome.benchmark["log"]


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ("hexagon", "Could not create Hexagon delegate"),
        ("nnapi:accelerator=google-edgetpu", "Must be one of: {nnapi-reference}."),
        ("gpu:backend=cl", "offers gl"),
    ],
)
def test_phone_without_refuses_before_running(phone, model, config, words) -> None:
    ph, runner = phone("galaxy-a14")
    with pytest.raises(JobError, match=words.replace("{", r"\{").replace(".", r"\.")):
        runner.run(_spec(model, config))
    assert not [c for c in ph.commands if "benchmark_model" in c]


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (
            "nnapi:accelerator=google-edgetpu",
            "ERROR: Could not find the specified NNAPI accelerator: google-edgetpu. "
            "Must be one of: {nnapi-reference}.\nERROR: Failed to apply NNAPI delegate.",
        ),
        ("gpu:backend=cl", "Can not open OpenCL library on this device"),
    ],
)
def test_simulated_tool_fails_as_the_real_one(phone, model, monkeypatch, config, words) -> None:
    """Past the runner's check (facts that changed since discovery), the tool itself fails."""
    _, runner = phone("galaxy-a14")
    monkeypatch.setattr(runner, "supports", lambda c: (True, ""))
    with pytest.raises(ToolOutputError) as err:
        runner.run(_spec(model, config))
    assert words in err.value.log
    assert "ERROR: Benchmarking failed." in err.value.log
