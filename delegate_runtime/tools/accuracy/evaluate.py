"""Task accuracy runs: one evaluation, or the reference and the delegate side by side."""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from ...reader import load_model
from ..benchmark import BenchmarkOptions
from ..session_info import delegation_summary, device_facts, versions
from ..sessions import open_session
from .coco import CocoDataset, evaluate_detections
from .compare import delta, format_side_by_side
from .detection import Decoding, run_detector
from .imagenet import ClassificationDataset, evaluate_classification
from .preprocess import Preprocess


@dataclass
class AccuracyResult:
    """Metrics of the test run (and of the reference, with their delta, when compared)."""

    task: str
    model_path: str
    test: str
    metrics: dict[str, Any]
    reference: str | None = None
    reference_metrics: dict[str, Any] | None = None
    delta: dict[str, float] | None = None
    delegation: dict[str, Any] | None = None
    device: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    detections: list[dict[str, Any]] | None = None  #: COCO results of the test run
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("detections")
        return d


def _name(delegate: str, precision: str) -> str:
    return f"delegate_runtime {delegate} ({precision})"


def _session(model: Any, delegate: str, options: BenchmarkOptions, log: IO[str]) -> Any:
    extra = options.gpu_session_options(model) if delegate == "gpu" else {}
    precision = options.precision if delegate == "gpu" else "fp32"
    return open_session(model, delegate, precision, options.device, log, **extra)


def _evaluate_one(
    task: str, session: Any, model: Any, data: Any, cfg: dict, progress: Any, stage: str
):
    """(summary metrics, full metrics dict, printed text, detections)."""
    if task == "classification":
        m = evaluate_classification(session, model, data, cfg["preprocess"], progress, stage)
        return m.metrics(), m.to_dict(), m.format(), None
    dets, latency = run_detector(
        session,
        model,
        data,
        cfg["preprocess"],
        cfg["decoding"],
        cfg.get("num_images", 0),
        progress,
        stage,
    )
    m = evaluate_detections(data, dets)
    head = (
        f"Num evaluation runs: {latency.count}\n"
        f"Inference latency: avg={latency.avg:g}(us), std_dev={latency.std}(us)\n"
    )
    full = m.to_dict() | {"inference_avg_us": latency.avg, "num_detections": len(dets)}
    return m.metrics(), full, head + m.format(), dets


def run_accuracy(
    task: str,
    model_path: str,
    data: ClassificationDataset | CocoDataset,
    options: BenchmarkOptions,
    preprocess: Preprocess | None = None,
    decoding: Decoding | None = None,
    num_images: int = 0,
    compare: bool = True,
    progress: Any = None,
    out: IO[str] | None = None,
) -> AccuracyResult:
    """Evaluate `task` ("classification" or "detection") on the chosen delegate; with
    `compare` and a GPU delegate, also on the CPU reference, printing both and the delta."""
    model = load_model(model_path)
    cfg = {
        "preprocess": preprocess or Preprocess(),
        "decoding": decoding or Decoding(),
        "num_images": num_images,
    }
    delegate_log = io.StringIO()
    parts: list[str] = []

    def emit(text: str) -> None:
        parts.append(text)
        if out is not None:
            out.write(text)
            out.flush()

    runs = [("cpu", "reference")] if options.use_gpu and compare else []
    runs.append((options.delegate, "test"))
    results: dict[str, Any] = {}
    test_session = None
    for delegate, role in runs:
        session = _session(model, delegate, options, delegate_log)
        name = _name(delegate, options.precision if delegate == "gpu" else "fp32")
        summary, full, text, dets = _evaluate_one(task, session, model, data, cfg, progress, role)
        if len(runs) > 1:
            emit(f"== {role}: {name} ==\n")
        emit(text)
        results[role] = (name, summary, full, dets)
        test_session = session
    t_name, t_summary, t_full, t_dets = results["test"]
    result = AccuracyResult(
        task=task,
        model_path=str(model_path),
        test=t_name,
        metrics=t_full,
        delegation=delegation_summary(test_session),
        options=options.delegate_fields() | {"compare": compare},
        detections=t_dets,
    )
    result.device = device_facts(test_session, options.delegate)
    result.versions = versions(result.device, f"delegate_runtime/{options.delegate}")
    if "reference" in results:
        r_name, r_summary, r_full, _ = results["reference"]
        result.reference, result.reference_metrics = r_name, r_full
        result.delta = delta(r_summary, t_summary)
        emit(format_side_by_side(r_summary, t_summary, r_name, t_name))
    result.log = "".join(parts)
    return result
