"""Jobs on simulated phones through the adb runner and the real adb server: the record a
local run produces, a phone lost mid-job, garbage output, a slow phone, and an injection
corpus of model names that proves exactly which commands reached the phone."""

from __future__ import annotations

import hashlib
import shlex
import time
from pathlib import Path

import numpy as np
import pytest

from delegate_runtime.errors import DeviceError, ModelError
from delegate_runtime.tools.benchmark_parser import parse_benchmark_output
from farm_core.configs import CONFIGS
from tests.support.farm import converter_named_model, write_model
from worker_agent.android import adb, discovery
from worker_agent.android.runner import AdbRunner, ToolOutputError, ToolTimeout
from worker_agent.android.simulator import SimulatedPhone, load_profile
from worker_agent.executor import result_values
from worker_agent.runners.base import JobSpec
from worker_agent.runners.cpu import CpuRunner

pytestmark = pytest.mark.integration

#: Small jobs: a few runs, no minimum times, no cooldown.
FAST = {"num_runs": 3, "warmup_runs": 1, "min_secs": 0.0, "max_secs": 5.0,
        "warmup_min_secs": 0.0, "diff_runs": 2, "cooldown_s": 0.0}  # fmt: skip
ARM64_BENCH = b"\x7fELF fake arm64 benchmark_model"
ARM64_EVAL = b"\x7fELF fake arm64 run_eval"
ARMV7_BENCH = b"\x7fELF fake armv7 benchmark_model"


#: The debug artifacts' capture around every run on a phone (docs/artifacts.md): the log
#: buffers cleared before, the run's lines dumped after.
LOGCAT_CLEAR = "logcat -c"
LOGCAT_DUMP = "logcat -d -v threadtime -t 20000"


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> Path:
    """The lab host's official tools, per ABI (stand-ins: the simulator runs its own)."""
    root = tmp_path_factory.mktemp("tools")
    for abi, name, data in (
        ("arm64-v8a", "benchmark_model", ARM64_BENCH),
        ("arm64-v8a", "run_eval", ARM64_EVAL),
        ("armeabi-v7a", "benchmark_model", ARMV7_BENCH),
    ):
        (root / abi).mkdir(exist_ok=True)
        (root / abi / name).write_bytes(data)
    return root


@pytest.fixture(autouse=True)
def _tools_env(tools, monkeypatch) -> None:
    monkeypatch.setenv("DEVICEFARM_ANDROID_TOOLS", str(tools))


@pytest.fixture
def phone(adb_server):
    """Factory: (simulated phone, its AdbRunner), connected through the real adb server."""
    phones: list[SimulatedPhone] = []
    server = adb.Server("127.0.0.1", adb_server.port)

    def make(profile: str | dict = "pixel-7", **faults) -> tuple[SimulatedPhone, AdbRunner]:
        p = load_profile(profile)
        for k, v in faults.items():
            setattr(p.faults, k, v)
        ph = SimulatedPhone(p).start()
        phones.append(ph)
        adb_server.connect(ph.serial)
        status = next(s for s in discovery.scan("lab", server) if s.serial == ph.serial)
        runner = AdbRunner(status.device)
        runner.setup()
        ph.commands.clear()  # discovery's getprop/dumpsys
        return ph, runner

    yield make
    for ph in phones:
        ph.stop()
        adb_server.run("disconnect", ph.serial)


def _spec(path: Path, config: str = "gpu-fp32", **settings) -> JobSpec:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return JobSpec(1, 1, path, sha, CONFIGS[config], FAST | settings)


def _bench_line(spec: JobSpec, tool_sha: str, profile: bool = False) -> str:
    """The timed invocation (the shipped path: no profiling), or the profiling pass."""
    gpu = spec.config.use_gpu
    flags = (f" --use_gpu=true --gpu_precision_loss_allowed={str(spec.config.precision == 'fp16').lower()}"
             if gpu else " --use_gpu=false")  # fmt: skip
    last = " --enable_op_profiling=true" if profile else " --report_peak_memory_footprint=true"
    return (
        f"/data/local/tmp/devicefarm/tools/{tool_sha[:16]}/benchmark_model "
        f"--graph=/data/local/tmp/devicefarm/{spec.model_sha256}.tflite --num_runs=3 "
        f"--warmup_runs=1 --min_secs=0 --max_secs=5 --warmup_min_secs=0{flags}{last}"
    )


def _rm_line(spec: JobSpec) -> str:
    return f"rm -f /data/local/tmp/devicefarm/{spec.model_sha256}.tflite"


def test_job_gives_the_record_of_a_local_run(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    model = write_model(tmp_path / "m.tflite")
    spec = _spec(model, "gpu-fp32")
    outcome = runner.run(spec)
    local = CpuRunner(runner.device)  # the host's reference, for the record's shape
    local_outcome = local.run(_spec(model, "cpu", diff_runs=0))
    b = outcome.benchmark
    assert set(local_outcome.benchmark) <= set(b)
    assert b["source"] == "benchmark_model" and b["count"] == 3 and b["avg_us"] > 0
    assert b["median_us"] is not None and b["init_us"] > 0
    assert outcome.delegation["nodes_delegated"] == outcome.delegation["nodes_total"] == 1
    assert b["model_sha256"] == spec.model_sha256
    # the diff record has our own diff's keys (run through run_eval on the phone)
    from delegate_runtime.tools.benchmark import BenchmarkOptions
    from delegate_runtime.tools.diff import run_inference_diff

    own_diff = run_inference_diff(str(model), BenchmarkOptions(), num_runs=1).to_dict()
    assert set(own_diff) <= set(outcome.diff) and outcome.diff["num_runs"] == 2
    assert outcome.diff["outputs"][0]["avg_error"] < 1e-3
    # the result columns the executor writes are all there
    values = result_values(outcome, runner.device.row(), 1.0)
    assert values["avg_us"] == b["avg_us"] and values["max_avg_error"] is not None
    assert values["delegated_ops"] == 1 and "Inference timings in us" in values["log"]
    # every flag was the tool's own: the simulator only warns on others, as the real one
    assert "Unconsumed cmdline flags" not in values["log"]
    # measurement hygiene: temperatures and clocks around the run
    for moment in ("before", "after"):
        reading = b["conditions"][moment]
        assert reading["thermal_c"]["BIG"] == pytest.approx(41.2)
        assert reading["cpu_khz"]["cpu7"] == 2850000
        assert reading["gpu_hz"] == {"28000000.mali": 848000000}
    # the phone's ABI got its tools; the model went by its hash and is gone afterwards
    bench_sha = hashlib.sha256(ARM64_BENCH).hexdigest()
    eval_sha = hashlib.sha256(ARM64_EVAL).hexdigest()
    assert (
        ph.fs.read(f"/data/local/tmp/devicefarm/tools/{bench_sha[:16]}/benchmark_model")
        == ARM64_BENCH
    )
    assert not ph.fs.exists(f"/data/local/tmp/devicefarm/{spec.model_sha256}.tflite")
    assert ph.commands == [
        LOGCAT_CLEAR,
        _bench_line(spec, bench_sha),
        _bench_line(spec, bench_sha, profile=True),
        f"/data/local/tmp/devicefarm/tools/{eval_sha[:16]}/run_eval "
        f"--model_file=/data/local/tmp/devicefarm/{spec.model_sha256}.tflite "
        "--num_runs=2 --num_interpreter_threads=1 --delegate=gpu "
        "--gpu_precision_loss_allowed=false",
        LOGCAT_DUMP,
        _rm_line(spec),
    ]
    # a second job reuses the pushed tools
    ph.sync_requests.clear()
    runner.run(_spec(model, "cpu"))
    assert [p for kind, p in ph.sync_requests if kind == "SEND"] == [
        f"/data/local/tmp/devicefarm/{spec.model_sha256}.tflite,33188"
    ]


def test_timed_runs_are_not_profiled_and_the_profile_is_a_pass_of_its_own(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    spec = _spec(write_model(tmp_path / "m.tflite"), "gpu-fp16", diff_runs=0)
    b = runner.run(spec).benchmark
    bench_sha = hashlib.sha256(ARM64_BENCH).hexdigest()
    timed_line, profile_line = _bench_line(spec, bench_sha), _bench_line(spec, bench_sha, True)
    assert ph.commands == [LOGCAT_CLEAR, timed_line, profile_line, LOGCAT_DUMP, _rm_line(spec)]
    assert b["timing"] == {"path": "shipped", "profile": "separate pass"}
    assert b["tool"]["argv"] == shlex.split(timed_line)
    assert b["tool"]["profile_argv"] == shlex.split(profile_line)
    # the figures are the timed invocation's, which printed no profile
    timed = parse_benchmark_output(b["log"])
    assert timed.op_profile is None and "Run Order" in b["profile_log"]
    assert (b["avg_us"], b["count"]) == (timed.inference.avg_us, timed.inference.count)
    # with the GPU delegate the profile times the delegate's node, as the real tool's does
    nodes = [(r["op"], r["node"], r["backend"]) for r in b["op_profile_nodes"]]
    assert nodes == [("TfLiteGpuDelegateV2", "[y]:1", "gpu")]
    assert b["op_profile"]["nodes_executed"] == 1


def test_an_input_named_with_a_colon_reaches_the_tool_escaped(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7")
    model = converter_named_model(tmp_path / "m.tflite", "StatefulPartitionedCall:0")
    values = tmp_path / "x.bin"
    values.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    sha = hashlib.sha256(values.read_bytes()).hexdigest()
    item = {"layer": "serving_default_input_1:0", "shape": [1, 4], "dtype": "float32",
            "sha256": sha, "path": str(values)}  # fmt: skip
    outcome = runner.run(_spec(model, "gpu-fp16", diff_runs=0, inputs=[item]))
    assert outcome.benchmark["avg_us"] > 0
    assert outcome.benchmark["user_inputs"] == ["serving_default_input_1:0"]
    remote = f"/data/local/tmp/devicefarm/inputs/{sha}.bin"
    timed = next(c for c in ph.commands if "benchmark_model" in c and "profiling" not in c)
    assert "--input_layer=serving_default_input_1:0 " in timed
    assert f"--input_layer_value_files=serving_default_input_1::0:{remote}" in timed


def test_a_32_bit_phone_gets_the_32_bit_tool(phone, tmp_path) -> None:
    profile = load_profile("pixel-7")
    profile.props["ro.product.cpu.abi"] = "armeabi-v7a"
    profile.props["ro.product.cpu.abilist"] = "armeabi-v7a,armeabi"
    ph, runner = phone(profile.__dict__ | {"faults": {}})
    runner.run(_spec(write_model(tmp_path / "m.tflite"), "cpu"))
    sha = hashlib.sha256(ARMV7_BENCH).hexdigest()
    assert ph.fs.read(f"/data/local/tmp/devicefarm/tools/{sha[:16]}/benchmark_model") == ARMV7_BENCH
    assert runner.versions()["abi"] == "armeabi-v7a"


def test_phone_lost_mid_job_is_a_device_error_and_goes_offline(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7", slow_s=30.0, drop_after_s=0.3)
    start = time.monotonic()
    with pytest.raises(DeviceError, match="went offline"):
        runner.run(_spec(write_model(tmp_path / "m.tflite"), "gpu-fp16"))
    assert time.monotonic() - start < 10.0  # noticed at once, not after the slow run
    assert adb.state(runner.client, ph.serial) == "offline"
    assert discovery.present([runner.device]) == set()


@pytest.mark.parametrize("garbage", ["noise", "truncated"])
def test_garbage_output_fails_the_job_and_keeps_the_raw_log(phone, tmp_path, garbage) -> None:
    ph, runner = phone("pixel-7", garbage=garbage)
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu")
    with pytest.raises(ToolOutputError, match="benchmark_model on android:.* gave no result") as e:
        runner.run(spec)
    assert isinstance(e.value, ModelError)  # the job fails; it is not retried elsewhere
    assert "STARTING!" in e.value.log
    if garbage == "noise":
        assert "Segmentation fault" in e.value.log
    else:
        assert "Loaded model" in e.value.log and "Inference timings" not in e.value.log
    assert adb.state(runner.client, ph.serial) == "device"
    assert ph.commands[-1] == _rm_line(spec)  # cleaned up all the same


def test_full_phone_disk_is_a_device_error(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7", disk_free_bytes=100)
    with pytest.raises(DeviceError, match="No space left on device"):
        runner.run(_spec(write_model(tmp_path / "m.tflite"), "cpu"))
    assert [p for p in ph.fs.nodes if p.endswith(".tflite")] == []


def test_slow_phone_times_out_and_its_tool_is_stopped(phone, tmp_path) -> None:
    ph, runner = phone("pixel-7", slow_s=60.0)
    spec = _spec(write_model(tmp_path / "m.tflite"), "cpu", tool_timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(ToolTimeout, match="ran past its 1 s deadline") as e:
        runner.run(spec)
    # the host's fault as much as the phone's: retried as infrastructure, never evidence
    assert isinstance(e.value, DeviceError) and e.value.retryable
    assert "STARTING!" in e.value.log
    assert time.monotonic() - start < 10.0
    tool = ph.commands[1].split()[0]
    assert ph.commands[0] == LOGCAT_CLEAR
    assert ph.commands[2:] == [f"pkill -f {tool}", LOGCAT_DUMP, _rm_line(spec)]
    deadline = time.monotonic() + 2
    while ph.processes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ph.processes == []


#: Hostile model file names: none of them may reach a shell line.
INJECTION_NAMES = [
    "a;reboot.tflite",
    "$(id).tflite",
    "`id`.tflite",
    "a\nreboot.tflite",
    "-rf.tflite",
    "--graph=evil.tflite",
    "'; rm -rf ~ '.tflite",
    "a b|sh&.tflite",
    '"$HOME".tflite',
]


@pytest.fixture(scope="module")
def corpus_phone(adb_server, tools):
    """One phone for the whole corpus (tools already pushed after the first case)."""
    import os

    os.environ["DEVICEFARM_ANDROID_TOOLS"] = str(tools)
    ph = SimulatedPhone("galaxy-s23").start()
    adb_server.connect(ph.serial)
    server = adb.Server("127.0.0.1", adb_server.port)
    status = next(s for s in discovery.scan("lab", server) if s.serial == ph.serial)
    runner = AdbRunner(status.device)
    yield ph, runner
    ph.stop()
    adb_server.run("disconnect", ph.serial)


@pytest.mark.parametrize("name", INJECTION_NAMES, ids=repr)
def test_injection_corpus_runs_only_the_intended_commands(corpus_phone, tmp_path, name) -> None:
    ph, runner = corpus_phone
    ph.commands.clear()
    ph.sync_requests.clear()
    model = write_model(tmp_path / name, scale=float(len(name)))
    spec = _spec(model, "gpu-fp16", diff_runs=0)
    runner.run(spec)
    bench_sha = hashlib.sha256(ARM64_BENCH).hexdigest()
    assert ph.commands == [
        LOGCAT_CLEAR,
        _bench_line(spec, bench_sha),
        _bench_line(spec, bench_sha, profile=True),
        LOGCAT_DUMP,
        _rm_line(spec),
    ]
    assert ph.violations == []
    pushed = {p for kind, p in ph.sync_requests if kind == "SEND"}
    model_push = f"/data/local/tmp/devicefarm/{spec.model_sha256}.tflite,33188"
    tool_push = f"/data/local/tmp/devicefarm/tools/{bench_sha[:16]}/benchmark_model,33261"
    assert model_push in pushed and pushed <= {model_push, tool_push}
    assert all(name not in p for _, p in ph.sync_requests)
