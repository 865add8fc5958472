"""The measurement commands as a user runs them: `devicefarm benchmark | diff | accuracy |
make-dataset` in a subprocess, on small models, with their exit codes and outputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.tools.benchmark_parser import parse_benchmark_output
from tests.conftest import require

FAST = ["--num_runs", "3", "--min_secs=0", "--warmup_min_secs=0"]


def devicefarm(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    exe = shutil.which("devicefarm")
    cmd = [exe] if exe else [sys.executable, "-m", "devicefarm.cli"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    """x[1,8] -> FULLY_CONNECTED(4) -> SOFTMAX."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", (1, 8), np.float32)
    w = g.const("w", np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32))
    h = g.tensor("h", (1, 4), np.float32)
    y = g.tensor("prob", (1, 4), np.float32)
    g.op("FULLY_CONNECTED", [x, w, g.const("b", np.zeros(4, np.float32))], [h])
    g.op("SOFTMAX", [h], [y], beta=1.0)
    g.output(y)
    path = tmp_path_factory.mktemp("e2e") / "tiny.tflite"
    path.write_bytes(b.build())
    return str(path)


def _gpu_available() -> bool:
    try:
        import pyopencl as cl

        import delegate_runtime.gpu.delegate  # noqa: F401

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:
        return False


# -- benchmark ------------------------------------------------------------------------


def test_benchmark_prints_tflite_lines_and_writes_json(model, tmp_path):
    out = tmp_path / "b.json"
    r = devicefarm(
        "benchmark",
        f"--graph={model}",
        *FAST,
        "--report_peak_memory_footprint=true",
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"INFO: Loaded model {model}"
    assert any(line.startswith("INFO: Inference timings in us: Init: ") for line in lines)
    assert any(
        line.startswith("INFO: Memory footprint delta from the start of the tool (MB): init=")
        for line in lines
    )
    record = json.loads(out.read_text())
    assert record["count"] == len(record["runs_us"]) >= 3
    assert record["init_process_us"] + record["init_model_us"] == record["init_us"]
    split = [line for line in lines if line.startswith("INFO: Init split (ms): once per process ")]
    assert len(split) == 1 and ", this model " in split[0]
    assert record["memory"]["peak_mb"] > 0 and record["log"] == r.stdout
    parsed = parse_benchmark_output(r.stdout)
    assert parsed.inference.count == record["count"]
    assert parsed.init_us == record["init_us"] and parsed.inference.p95_us == record["p95_us"]


def test_benchmark_prints_progress_lines_into_a_log(model):
    """stderr is a pipe here: no bar, but a line every 10 s with the runs and their rate."""
    r = devicefarm("benchmark", "--graph", model, "--min_secs=10.5", "--warmup_min_secs=0")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("benchmark: ")]
    assert len(lines) == 1, r.stderr
    assert " runs, " in lines[0] and lines[0].endswith(" s") and "/s" in lines[0]
    assert "\r" not in r.stderr


def test_benchmark_op_profiling(model):
    r = devicefarm("benchmark", "--graph", model, *FAST, "--enable_op_profiling")
    assert r.returncode == 0, r.stderr
    assert (
        "============================== Top by Computation Time =============================="
        in r.stdout
    )
    assert "Number of nodes executed: 2" in r.stdout


def test_benchmark_stops_at_max_secs(model):
    r = devicefarm(
        "benchmark",
        "--graph",
        model,
        "--num_runs=100000000",
        "--max_secs=0.3",
        "--warmup_min_secs=0",
    )
    assert r.returncode == 0, r.stderr
    count = parse_benchmark_output(r.stdout).inference.count
    assert 0 < count < 100000000


@pytest.mark.gpu
def test_benchmark_on_the_gpu_delegate(model, tmp_path):
    require(_gpu_available(), "an OpenCL device (PoCL here) and the GPU delegate")
    out = tmp_path / "g.json"
    r = devicefarm(
        "benchmark",
        "--graph",
        model,
        *FAST,
        "--use_gpu",
        "--require_full_delegation",
        "--enable_op_profiling",
        "--json",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (
        "Explicitly applied GPU delegate, and the model graph will be completely executed"
        in r.stdout
    )
    record = json.loads(out.read_text())
    assert record["delegation"]["fully_delegated"] is True
    assert record["device"]["kind"] == "opencl" and record["memory"]["device_bytes"] > 0
    assert {n["backend"] for n in record["op_profile"]["nodes"]} == {"gpu"}


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["--graph", "{missing}"], 2, "nope.tflite does not exist"),
        (["--graph", "{bad}"], 1, "ModelError"),
        (["--graph", "{model}", "--num_runs=-3"], 2, "must not be negative"),
        (["--graph", "{model}", "--use_gpu=maybe"], 2, "expected true or false"),
        (["--graph", "{model}", "--no_such_flag"], 2, "unrecognized arguments"),
        ([], 2, "--graph"),
    ],
    ids=["missing_file", "bad_model", "negative_runs", "bad_bool", "unknown_flag", "no_graph"],
)
def test_benchmark_errors(model, tmp_path, args, code, message):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"\x00" * 64)
    paths = {"missing": str(tmp_path / "nope.tflite"), "bad": str(bad), "model": model}
    r = devicefarm("benchmark", *[a.format(**paths) for a in args])
    assert r.returncode == code
    assert message in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["benchmark", "diff", "accuracy", "make-dataset"])
def test_help_explains_every_flag(command):
    r = devicefarm(command, "--help")
    assert r.returncode == 0
    flags = {
        "benchmark": [
            "--graph",
            "--num_runs",
            "--min_secs",
            "--max_secs",
            "--warmup_runs",
            "--warmup_min_secs",
            "--use_gpu",
            "--gpu_precision_loss_allowed",
            "--gpu_experimental_enable_quant",
            "--max_delegated_partitions",
            "--delegate_serialize_dir",
            "--delegate_serialize_token",
            "--enable_op_profiling",
            "--report_peak_memory_footprint",
            "--require_full_delegation",
            "--device",
            "--json",
            "--progress",
        ],
        "diff": ["--model", "--num_runs", "--seed", "--use_gpu", "--json"],
        "accuracy": ["classification", "detection"],
        "make-dataset": ["classification", "detection"],
    }[command]
    for flag in flags:
        assert flag in r.stdout, flag


# -- the README's example model -------------------------------------------------------------


@pytest.fixture(scope="module")
def example_model(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("example") / "example.tflite"
    r = devicefarm("example", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {path} (")
    return str(path)


def test_example_model_outputs_carry_signal(example_model):
    """LiteRT's reference kernels on random images: the softmax is peaked (a random head
    leaves it uniform at 0.01, and every diff near zero) and its top class follows the
    input."""
    from delegate_runtime import litert

    require(litert.available(), "ai-edge-litert")
    with open(example_model, "rb") as f:
        it = litert.make_interpreter(f.read(), reference=True)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(7)
    tops, peaks = set(), []
    for _ in range(8):
        it.set_tensor(inp["index"], rng.uniform(-1, 1, inp["shape"]).astype(np.float32))
        it.invoke()
        probs = it.get_tensor(out["index"])[0]
        tops.add(int(probs.argmax()))
        peaks.append(float(probs.max()))
    assert len(probs) == 100 and np.median(peaks) > 0.2
    assert len(tops) >= 3


def _diff_error(model: str, *flags: str) -> float:
    r = devicefarm("diff", "--model", model, "--num_runs", "3", "--seed", "0", *flags)
    assert r.returncode == 0, r.stderr
    return float(r.stdout.split("OutputDiff[0]: avg_error=")[1].split(",")[0])


@pytest.mark.gpu
def test_example_model_diff_tells_fp16_from_fp32(example_model):
    """The figure the README's first table shows: on the example, fp16 differs from the
    CPU reference visibly (about 2e-4) and fp32 by float rounding only (about 5e-8)."""
    require(_gpu_available(), "an OpenCL device and the GPU delegate")
    fp32 = _diff_error(example_model, "--use_gpu", "--gpu_precision_loss_allowed=false")
    fp16 = _diff_error(example_model, "--use_gpu")
    assert fp32 < 1e-6 and fp16 > 1e-5


# -- inference diff ---------------------------------------------------------------------


def test_diff_prints_four_lines_and_json(model, tmp_path):
    out = tmp_path / "d.json"
    r = devicefarm("diff", "--model", model, "--num_runs", "3", "--seed", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Num evaluation runs: 3"
    assert lines[1].startswith("Reference run latency: avg=") and lines[1].endswith("(us)")
    assert lines[2].startswith("Test run latency: avg=")
    assert lines[3].startswith("OutputDiff[0]: avg_error=")
    record = json.loads(out.read_text())
    assert set(record["outputs"][0]) >= {"avg_error", "std_dev", "max_error", "worst"}


def test_diff_missing_model(tmp_path):
    r = devicefarm("diff", "--model", str(tmp_path / "nope.tflite"))
    assert r.returncode == 2 and "argument --model: " in r.stderr and "does not exist" in r.stderr


# -- task accuracy on generated datasets -------------------------------------------------------


def test_classification_accuracy_on_a_generated_dataset(tmp_path):
    r = devicefarm(
        "make-dataset",
        "classification",
        "--out",
        str(tmp_path),
        "--num_classes",
        "3",
        "--images_per_class",
        "2",
        "--size",
        "16",
    )
    assert r.returncode == 0, r.stderr
    out = tmp_path / "acc.json"
    r = devicefarm(
        "accuracy",
        "classification",
        "--model",
        str(tmp_path / "classifier.tflite"),
        "--images",
        str(tmp_path / "images"),
        "--ground_truth_labels",
        str(tmp_path / "ground_truth_labels.txt"),
        "--model_output_labels",
        str(tmp_path / "model_output_labels.txt"),
        "--json",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert "Num evaluation runs: 6" in r.stdout
    top = [line for line in r.stdout.splitlines() if line.startswith("Top-")]
    assert [line.split(" Accuracy: ")[0] for line in top] == [f"Top-{k}" for k in range(1, 11)]
    assert float(top[2].split(": ")[1]) == 1.0  # 3 classes
    assert json.loads(out.read_text())["metrics"]["num_images"] == 6


def test_detection_map_of_precomputed_results(tmp_path):
    r = devicefarm("make-dataset", "detection", "--out", str(tmp_path), "--num_images", "3")
    assert r.returncode == 0, r.stderr
    coco = json.loads((tmp_path / "annotations.json").read_text())
    perfect = [
        dict(image_id=a["image_id"], category_id=a["category_id"], bbox=a["bbox"], score=0.9)
        for a in coco["annotations"]
    ]
    dets = tmp_path / "dets.json"
    dets.write_text(json.dumps(perfect))
    r = devicefarm(
        "accuracy",
        "detection",
        "--detections",
        str(dets),
        "--annotations",
        str(tmp_path / "annotations.json"),
    )
    assert r.returncode == 0, r.stderr
    assert "Overall mAP: 1" in r.stdout
    assert "Average Precision [IOU Threshold=0.95]: 1" in r.stdout


def test_accuracy_missing_images_folder(tmp_path):
    labels = tmp_path / "l.txt"
    labels.write_text("a\n")
    (tmp_path / "m.tflite").write_bytes(b"")  # read only after the flags are checked
    r = devicefarm(
        "accuracy",
        "classification",
        "--model",
        str(tmp_path / "m.tflite"),
        "--images",
        str(tmp_path / "none"),
        "--ground_truth_labels",
        str(labels),
        "--model_output_labels",
        str(labels),
    )
    assert r.returncode == 2 and "argument --images: " in r.stderr
    assert "none does not exist" in r.stderr and "Traceback" not in r.stderr
