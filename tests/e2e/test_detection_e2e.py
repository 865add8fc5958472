"""Object detection through a real SSD-style model, as a user runs it: `devicefarm
make-dataset detection` writes images, COCO annotations and detector.tflite (ending with
the TFLite_Detection_PostProcess custom op), then `devicefarm accuracy detection` runs
it on the CPU reference and, where OpenCL exists, on the GPU delegate with the custom op
left on the CPU (mixed execution). mAP must be positive and equal pycocotools' on the
same detections."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

NUM_IMAGES = 6
#: printed metrics have 6 significant digits
PRINTED_TOL = 1e-5


def devicefarm(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    exe = shutil.which("devicefarm")
    cmd = [exe] if exe else [sys.executable, "-m", "devicefarm.cli"]
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _gpu_available() -> bool:
    try:
        import pyopencl as cl

        import delegate_runtime.gpu.delegate  # noqa: F401

        return any(p.get_devices() for p in cl.get_platforms())
    except Exception:
        return False


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("detection")
    r = devicefarm("make-dataset", "detection", "--out", str(root), "--num_images", str(NUM_IMAGES))
    assert r.returncode == 0, r.stderr
    assert f"model: {root / 'detector.tflite'}" in r.stdout
    return root


def pycocotools_map(annotations: Path, detections: list[dict]) -> tuple[float, float, float]:
    """(mAP@[.50:.95], AP50, AP75) by pycocotools' COCOeval on the same detections."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(annotations))
        ev = COCOeval(gt, gt.loadRes(detections), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return float(ev.stats[0]), float(ev.stats[1]), float(ev.stats[2])


def printed(stdout: str, prefix: str) -> list[float]:
    return [float(line.split(": ")[1]) for line in stdout.splitlines() if line.startswith(prefix)]


def run_accuracy(dataset: Path, out: Path, *flags: str) -> subprocess.CompletedProcess:
    return devicefarm(
        "accuracy",
        "detection",
        "--model",
        str(dataset / "detector.tflite"),
        "--annotations",
        str(dataset / "annotations.json"),
        "--images",
        str(dataset / "images"),
        "--detections_out",
        str(out / "dets.json"),
        "--json",
        str(out / "result.json"),
        "--progress=false",
        *flags,
    )


def check_against_pycocotools(dataset: Path, out: Path, stdout: str) -> dict:
    record = json.loads((out / "result.json").read_text())
    metrics = record["metrics"]
    assert metrics["num_images"] == NUM_IMAGES and metrics["num_detections"] > 0
    assert metrics["mAP"] > 0.3 and metrics["AP50"] > 0.5  # the detector finds the objects
    dets = json.loads((out / "dets.json").read_text())
    ref = pycocotools_map(dataset / "annotations.json", dets)
    assert (metrics["mAP"], metrics["AP50"], metrics["AP75"]) == pytest.approx(ref, abs=1e-9)
    assert printed(stdout, "Overall mAP: ")[-1] == pytest.approx(ref[0], abs=PRINTED_TOL)
    ap50 = printed(stdout, "Average Precision [IOU Threshold=0.5]: ")[-1]
    assert ap50 == pytest.approx(ref[1], abs=PRINTED_TOL)
    return record


def test_detector_on_the_cpu_reference(dataset: Path, tmp_path: Path) -> None:
    r = run_accuracy(dataset, tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"Num evaluation runs: {NUM_IMAGES}" in r.stdout
    assert len(printed(r.stdout, "Average Precision [IOU Threshold=")) == 10
    check_against_pycocotools(dataset, tmp_path, r.stdout)


def test_detector_on_the_gpu_delegate_with_the_custom_op_on_the_cpu(
    dataset: Path, tmp_path: Path
) -> None:
    require(_gpu_available(), "an OpenCL device (PoCL here)")
    r = run_accuracy(dataset, tmp_path, "--use_gpu")
    assert r.returncode == 0, r.stderr
    assert "== reference: delegate_runtime cpu (fp32) ==" in r.stdout
    assert "== test: delegate_runtime gpu" in r.stdout
    assert len(printed(r.stdout, "Overall mAP: ")) == 2
    record = check_against_pycocotools(dataset, tmp_path, r.stdout)
    delegation = record["delegation"]
    assert delegation["partitions"] >= 1 and not delegation["fully_delegated"]
    assert delegation["nodes_delegated"] == delegation["nodes_total"] - 1
    assert [u["op"] for u in delegation["unsupported"]] == ["CUSTOM:TFLite_Detection_PostProcess"]
    assert abs(record["delta"]["mAP"]) < 0.05  # fp16 may move a score, not the result
