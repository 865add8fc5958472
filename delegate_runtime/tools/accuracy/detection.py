"""Run an SSD-style detector over COCO images and decode its outputs into COCO results.

Decoding (TFLite_Detection_PostProcess's outputs):
- boxes [1, N, 4]: (ymin, xmin, ymax, xmax), normalised to [0, 1] of the input image;
- classes [1, N]: class index as float, 0-based over the model's labels;
- scores [1, N]: confidence; count [1]: how many of the N rows are valid.
Outputs are found by name ("box", "class", "score", "num"/"count"), else by shape (the
[1, N, 4] tensor is boxes, the one-element tensor is count) and, for the two [1, N]
tensors, in TFLite's order (classes, then scores). A box becomes COCO's
[x, y, w, h] in pixels of the original image: x = xmin * W, y = ymin * H,
w = (xmax - xmin) * W, h = (ymax - ymin) * H, coordinates clipped to [0, 1] first.
A class index c maps to category `label_map[c + class_offset]`; by default `label_map` is
the annotation file's category ids in ascending order. Rows mapping outside it are dropped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import JobError, ModelError
from ...graph import Model
from ..progress import Reporter
from ..stats import Stat
from .coco import CocoDataset
from .preprocess import Preprocess, dequantized, prepare


@dataclass
class Decoding:
    """How detector outputs map onto COCO categories."""

    class_offset: int = 0  #: added to each class index (1 when label_map[0] is background)
    label_map: list[int] | None = None  #: index -> category id (default: sorted ids)
    score_threshold: float = 0.0  #: rows scoring below are dropped (COCO AP wants all)


ROLES = ("boxes", "classes", "scores", "count")
_NAME_HINTS = {
    "boxes": ("box",),
    "classes": ("class",),
    "scores": ("score",),
    "count": ("num", "count"),
}


def identify_outputs(model: Model) -> dict[str, int]:
    """Output position of each role (boxes, classes, scores, count)."""
    sg = model.main
    tensors = [sg.tensors[t] for t in sg.outputs]
    if len(tensors) != 4:
        raise ModelError(f"an SSD-style detector has 4 outputs; this model has {len(tensors)}")
    by_name: dict[str, int] = {}
    for role, hints in _NAME_HINTS.items():
        hits = [i for i, t in enumerate(tensors) if any(h in t.name.lower() for h in hints)]
        if len(hits) == 1:
            by_name[role] = hits[0]
    if len(set(by_name.values())) == 4 and len(by_name) == 4:
        return by_name
    roles: dict[str, int] = {}
    rest = []
    for i, t in enumerate(tensors):
        if len(t.shape) == 3 and t.shape[-1] == 4:
            roles["boxes"] = i
        elif int(np.prod(t.shape)) == 1:
            roles["count"] = i
        else:
            rest.append(i)
    if "boxes" not in roles or "count" not in roles or len(rest) != 2:
        shapes = [list(t.shape) for t in tensors]
        raise ModelError(f"cannot tell boxes, classes, scores and count apart: shapes {shapes}")
    roles["classes"], roles["scores"] = rest
    return roles


def decode(
    outputs: list[np.ndarray],
    roles: dict[str, int],
    image: dict[str, Any],
    label_map: list[int],
    decoding: Decoding,
) -> list[dict[str, Any]]:
    """COCO results ({image_id, category_id, bbox, score}) of one image's outputs."""
    boxes = np.asarray(outputs[roles["boxes"]], np.float64).reshape(-1, 4)
    classes = np.asarray(outputs[roles["classes"]], np.float64).reshape(-1)
    scores = np.asarray(outputs[roles["scores"]], np.float64).reshape(-1)
    count = int(round(float(np.asarray(outputs[roles["count"]]).reshape(-1)[0])))
    n = max(0, min(count, len(boxes), len(classes), len(scores)))
    width, height = float(image["width"]), float(image["height"])
    out = []
    for i in range(n):
        if scores[i] < decoding.score_threshold:
            continue
        c = int(classes[i]) + decoding.class_offset
        if not 0 <= c < len(label_map):
            continue
        ymin, xmin, ymax, xmax = np.clip(boxes[i], 0.0, 1.0)
        out.append(
            {
                "image_id": int(image["id"]),
                "category_id": int(label_map[c]),
                "bbox": [
                    float(xmin * width),
                    float(ymin * height),
                    float(max(xmax - xmin, 0.0) * width),
                    float(max(ymax - ymin, 0.0) * height),
                ],
                "score": float(scores[i]),
            }
        )
    return out


def run_detector(
    session: Any,
    model: Model,
    data: CocoDataset,
    pre: Preprocess,
    decoding: Decoding,
    num_images: int = 0,
    progress: Any = None,
    stage: str = "detection",
) -> tuple[list[dict[str, Any]], Stat]:
    """Detections on every image (the first `num_images` if > 0) and inference latency."""
    pre.validate()
    sg = model.main
    if len(sg.inputs) != 1:
        raise ModelError(f"a detector takes one image input; this model takes {len(sg.inputs)}")
    t_in = sg.tensors[sg.inputs[0]]
    t_outs = [sg.tensors[t] for t in sg.outputs]
    roles = identify_outputs(model)
    label_map = decoding.label_map or data.category_ids
    ids = sorted(data.images)[: num_images or None]
    latency = Stat()
    results: list[dict[str, Any]] = []
    reporter = Reporter(progress)
    reporter.start(stage, len(ids))
    try:
        for image_id in ids:
            image = data.images[image_id]
            path = data.root / image["file_name"]
            if not path.exists():
                raise JobError(f"image {path} (id {image_id}) does not exist")
            x = prepare(path, t_in, pre)
            start = time.perf_counter_ns()
            raw = session.invoke([x])
            latency.add((time.perf_counter_ns() - start) // 1000)
            outs = [dequantized(np.asarray(o), t) for o, t in zip(raw, t_outs, strict=True)]
            results += decode(outs, roles, image, label_map, decoding)
            reporter.update()
    finally:
        reporter.close()
    return results, latency
