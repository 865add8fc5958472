"""Image classification top-K accuracy over an ILSVRC-style folder (TFLite's ImageNet
evaluation): images sorted by file name, a ground-truth file with one label per image in
that order, and the model's output labels, one per output index.

    Num evaluation runs: 50
    Preprocessing latency: avg=1204.5(us), std_dev=80(us)
    Inference latency: avg=7281.64(us), std_dev=2089(us)
    Top-1 Accuracy: 0.733333
    ...
    Top-10 Accuracy: 0.96
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import JobError, ModelError
from ...graph import Model
from ..progress import Reporter
from ..stats import Stat, cpp_double
from .preprocess import Preprocess, dequantized, prepare

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp")
TOP_K = 10


@dataclass
class ClassificationDataset:
    images: list[Path]
    labels: list[str]  #: ground truth, one per image
    model_labels: list[str]  #: output index -> label


def read_lines(path: str | Path, what: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except OSError as exc:
        raise JobError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    while lines and not lines[-1]:
        lines.pop()
    return lines


def list_images(folder: str | Path) -> list[Path]:
    root = Path(folder)
    if not root.is_dir():
        raise JobError(f"image folder {folder} does not exist")
    return sorted(p for p in root.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def load_dataset(
    images_dir: str | Path,
    ground_truth_labels: str | Path,
    model_output_labels: str | Path,
    num_images: int = 0,
) -> ClassificationDataset:
    """Read and check an ILSVRC-style dataset; `num_images` > 0 keeps the first ones."""
    images = list_images(images_dir)
    truth = read_lines(ground_truth_labels, "ground-truth labels")
    model_labels = read_lines(model_output_labels, "model output labels")
    if not images:
        raise JobError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {images_dir}")
    if len(truth) != len(images):
        raise JobError(
            f"{len(images)} images but {len(truth)} ground-truth labels in {ground_truth_labels}"
        )
    known = set(model_labels)
    unknown = sorted({t for t in truth if t not in known})
    if unknown:
        raise JobError(f"ground-truth labels not among the model's labels: {unknown[:5]}")
    if num_images > 0:
        images, truth = images[:num_images], truth[:num_images]
    return ClassificationDataset(images, truth, model_labels)


@dataclass
class ClassificationMetrics:
    """Top-K accuracies (K = 1..10) and latencies of one evaluation."""

    num_images: int = 0
    correct: list[int] = field(default_factory=lambda: [0] * TOP_K)  #: hits within top K
    preprocessing_us: Stat = field(default_factory=Stat)
    inference_us: Stat = field(default_factory=Stat)

    @property
    def topk(self) -> list[float]:
        n = max(self.num_images, 1)
        return [c / n for c in self.correct]

    def add(self, scores: np.ndarray, truth_index: int) -> None:
        order = np.argsort(-scores, kind="stable")
        rank = int(np.nonzero(order == truth_index)[0][0])
        for k in range(rank, TOP_K):
            self.correct[k] += 1
        self.num_images += 1

    def metrics(self) -> dict[str, float]:
        return {f"top{k + 1}": a for k, a in enumerate(self.topk)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_images": self.num_images,
            "topk_accuracy": self.topk,
            "preprocessing_avg_us": self.preprocessing_us.avg,
            "inference_avg_us": self.inference_us.avg,
            "inference_std_us": self.inference_us.std,
        }

    def format(self) -> str:
        lines = [
            f"Num evaluation runs: {self.num_images}",
            f"Preprocessing latency: avg={cpp_double(self.preprocessing_us.avg)}(us), "
            f"std_dev={self.preprocessing_us.std}(us)",
            f"Inference latency: avg={cpp_double(self.inference_us.avg)}(us), "
            f"std_dev={self.inference_us.std}(us)",
        ]
        lines += [f"Top-{k + 1} Accuracy: {cpp_double(a)}" for k, a in enumerate(self.topk)]
        return "\n".join(lines) + "\n"


def evaluate_classification(
    session: Any,
    model: Model,
    data: ClassificationDataset,
    pre: Preprocess,
    progress: Any = None,
    stage: str = "top-K",
) -> ClassificationMetrics:
    """Run every image through `session`; output 0 holds one score per model label."""
    pre.validate()
    sg = model.main
    if len(sg.inputs) != 1:
        raise ModelError(f"a classifier takes one image input; this model takes {len(sg.inputs)}")
    t_in, t_out = sg.tensors[sg.inputs[0]], sg.tensors[sg.outputs[0]]
    classes = int(np.prod(t_out.shape))
    if classes != len(data.model_labels):
        raise JobError(
            f"the model gives {classes} scores but there are {len(data.model_labels)} output labels"
        )
    index = {label: i for i, label in enumerate(data.model_labels)}
    m = ClassificationMetrics()
    reporter = Reporter(progress)
    reporter.start(stage, len(data.images))
    try:
        for path, label in zip(data.images, data.labels, strict=True):
            t0 = time.perf_counter_ns()
            x = prepare(path, t_in, pre)
            t1 = time.perf_counter_ns()
            out = session.invoke([x])[0]
            t2 = time.perf_counter_ns()
            m.preprocessing_us.add((t1 - t0) // 1000)
            m.inference_us.add((t2 - t1) // 1000)
            m.add(dequantized(np.asarray(out), t_out).reshape(-1), index[label])
            reporter.update()
    finally:
        reporter.close()
    return m
