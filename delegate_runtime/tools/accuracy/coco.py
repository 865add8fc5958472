"""COCO detection mean average precision, computed as pycocotools' COCOeval does (bbox):

- per image and category, detections sorted by score (stable), at most 100 kept;
- IoU of [x, y, w, h] boxes; a crowd ground truth's union is the detection's area;
- per IoU threshold (0.50, 0.55, ..., 0.95), greedy matching in score order to the best
  unmatched ground truth (crowd ones may match many; ignored ones only as a last resort);
- per category, precision made monotone and read at 101 recall points (0, 0.01, ..., 1);
- AP = mean over categories with ground truth (and over thresholds for AP@[.50:.95]).

Only the "all" area range and maxDets = 100 are summarised.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import JobError
from ..stats import cpp_double

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
MAX_DETS = 100
AREA_ALL = (0.0, 1e5**2)


@dataclass
class CocoDataset:
    """The parts of a COCO annotation file that bbox evaluation reads."""

    images: dict[int, dict[str, Any]]  #: id -> {file_name, width, height}
    annotations: list[dict[str, Any]]
    categories: dict[int, str]  #: id -> name
    root: Path = Path(".")  #: folder the file names are relative to

    @property
    def category_ids(self) -> list[int]:
        return sorted(self.categories)


def load_coco(annotation_file: str | Path, images_dir: str | Path | None = None) -> CocoDataset:
    """Read a COCO instances json; image files are under `images_dir` (default: its folder)."""
    try:
        with open(annotation_file, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as exc:
        raise JobError(f"cannot read annotations {annotation_file}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise JobError(f"annotations {annotation_file} are not valid JSON: {exc}") from exc
    try:
        images = {int(i["id"]): i for i in raw["images"]}
        categories = {int(c["id"]): str(c.get("name", c["id"])) for c in raw["categories"]}
        anns = list(raw.get("annotations", []))
        for a in anns:
            if len(a["bbox"]) != 4 or int(a["image_id"]) not in images:
                raise JobError(f"annotation {a.get('id')} has a bad bbox or image id")
    except (KeyError, TypeError, ValueError) as exc:
        raise JobError(f"annotations {annotation_file} are not COCO instances: {exc}") from exc
    root = Path(images_dir) if images_dir else Path(annotation_file).parent
    return CocoDataset(images, anns, categories, root)


def box_iou(dt: np.ndarray, gt: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """IoU matrix [len(dt), len(gt)] of [x, y, w, h] boxes (crowd: union = dt area)."""
    if len(dt) == 0 or len(gt) == 0:
        return np.zeros((len(dt), len(gt)))
    dx1, dy1 = dt[:, 0:1], dt[:, 1:2]
    dx2, dy2 = dx1 + dt[:, 2:3], dy1 + dt[:, 3:4]
    gx1, gy1 = gt[:, 0], gt[:, 1]
    gx2, gy2 = gx1 + gt[:, 2], gy1 + gt[:, 3]
    iw = np.clip(np.minimum(dx2, gx2) - np.maximum(dx1, gx1), 0, None)
    ih = np.clip(np.minimum(dy2, gy2) - np.maximum(dy1, gy1), 0, None)
    inter = iw * ih
    da = (dt[:, 2] * dt[:, 3])[:, None]
    ga = (gt[:, 2] * gt[:, 3])[None, :]
    union = np.where(crowd[None, :], da, da + ga - inter)
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


@dataclass
class _ImageEval:
    scores: np.ndarray  #: [D]
    matched: np.ndarray  #: [T, D] bool
    ignored: np.ndarray  #: [T, D] bool
    num_gt: int  #: not ignored


def _evaluate_image(gts: list[dict], dts: list[dict]) -> _ImageEval | None:
    if not gts and not dts:
        return None
    g_ignore = np.array([bool(g.get("iscrowd", 0)) for g in gts], bool)  # as COCOeval
    g_area = np.array([float(g.get("area", g["bbox"][2] * g["bbox"][3])) for g in gts])
    g_ignore |= (g_area < AREA_ALL[0]) | (g_area > AREA_ALL[1])
    g_order = np.argsort(g_ignore, kind="mergesort")
    g_ignore = g_ignore[g_order]
    g_box = np.array([gts[i]["bbox"] for i in g_order], np.float64).reshape(-1, 4)
    g_crowd = np.array([bool(gts[i].get("iscrowd", 0)) for i in g_order], bool)
    d_order = np.argsort([-d["score"] for d in dts], kind="mergesort")[:MAX_DETS]
    d_box = np.array([dts[i]["bbox"] for i in d_order], np.float64).reshape(-1, 4)
    scores = np.array([dts[i]["score"] for i in d_order], np.float64)
    ious = box_iou(d_box, g_box, g_crowd)
    T, D, G = len(IOU_THRESHOLDS), len(d_order), len(g_order)
    matched = np.zeros((T, D), bool)
    d_ignored = np.zeros((T, D), bool)
    for ti, t in enumerate(IOU_THRESHOLDS):
        g_taken = np.zeros(G, bool)
        for di in range(D):
            best, m = min(t, 1 - 1e-10), -1
            for gi in range(G):
                if g_taken[gi] and not g_crowd[gi]:
                    continue
                if m > -1 and not g_ignore[m] and g_ignore[gi]:
                    break  # only ignored ground truth is left
                if ious[di, gi] < best:
                    continue
                best, m = ious[di, gi], gi
            if m == -1:
                continue
            d_ignored[ti, di] = g_ignore[m]
            matched[ti, di] = True
            g_taken[m] = True
    d_area = d_box[:, 2] * d_box[:, 3]
    out_of_range = (d_area < AREA_ALL[0]) | (d_area > AREA_ALL[1])
    d_ignored |= ~matched & out_of_range[None, :]
    return _ImageEval(scores, matched, d_ignored, int((~g_ignore).sum()))


def _average_precision(evals: list[_ImageEval]) -> np.ndarray:
    """AP per IoU threshold of one category ([T]), or -1 where it has no ground truth."""
    T = len(IOU_THRESHOLDS)
    num_gt = sum(e.num_gt for e in evals)
    if num_gt == 0:
        return np.full(T, -1.0)
    scores = np.concatenate([e.scores for e in evals]) if evals else np.zeros(0)
    order = np.argsort(-scores, kind="mergesort")
    matched = np.concatenate([e.matched for e in evals], axis=1)[:, order]
    ignored = np.concatenate([e.ignored for e in evals], axis=1)[:, order]
    tps = np.cumsum(matched & ~ignored, axis=1, dtype=np.float64)
    fps = np.cumsum(~matched & ~ignored, axis=1, dtype=np.float64)
    ap = np.zeros(T)
    for ti in range(T):
        tp, fp = tps[ti], fps[ti]
        recall = tp / num_gt
        precision = tp / (tp + fp + np.spacing(1))
        for i in range(len(precision) - 1, 0, -1):
            precision[i - 1] = max(precision[i - 1], precision[i])
        idx = np.searchsorted(recall, RECALL_POINTS, side="left")
        q = np.zeros(len(RECALL_POINTS))
        valid = idx < len(precision)
        q[valid] = precision[idx[valid]]
        ap[ti] = q.mean()
    return ap


@dataclass
class DetectionMetrics:
    """COCO bbox AP: per IoU threshold and category, and the summaries."""

    ap: np.ndarray = field(default_factory=lambda: np.zeros((0, len(IOU_THRESHOLDS))))
    category_ids: list[int] = field(default_factory=list)
    num_images: int = 0

    def _mean(self, columns: slice | int) -> float:
        vals = self.ap[:, columns]
        vals = vals[vals > -1]
        return float(vals.mean()) if vals.size else -1.0

    @property
    def map(self) -> float:
        """AP averaged over IoU .50:.95 and categories."""
        return self._mean(slice(None))

    @property
    def map50(self) -> float:
        return self._mean(0)

    @property
    def map75(self) -> float:
        return self._mean(5)

    def at(self, ti: int) -> float:
        return self._mean(ti)

    def metrics(self) -> dict[str, float]:
        return {"mAP": self.map, "AP50": self.map50, "AP75": self.map75}

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_images": self.num_images,
            "mAP": self.map,
            "AP50": self.map50,
            "AP75": self.map75,
            "ap_per_iou": {f"{t:.2f}": self.at(i) for i, t in enumerate(IOU_THRESHOLDS)},
            "ap_per_category": {
                str(c): float(row[row > -1].mean()) if (row > -1).any() else None
                for c, row in zip(self.category_ids, self.ap, strict=True)
            },
        }

    def format(self) -> str:
        """TFLite's object-detection evaluation lines (COCO-style AP values)."""
        lines = [
            f"Average Precision [IOU Threshold={cpp_double(round(float(t), 2))}]: "
            f"{cpp_double(self.at(i))}"
            for i, t in enumerate(IOU_THRESHOLDS)
        ]
        lines.append(f"Overall mAP: {cpp_double(self.map)}")
        return "\n".join(lines) + "\n"


def evaluate_detections(data: CocoDataset, detections: list[dict[str, Any]]) -> DetectionMetrics:
    """COCO bbox AP of `detections` ({image_id, category_id, bbox [x,y,w,h], score})."""
    gts: dict[tuple[int, int], list[dict]] = defaultdict(list)
    dts: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for a in data.annotations:
        gts[int(a["image_id"]), int(a["category_id"])].append(a)
    for d in detections:
        if int(d["image_id"]) in data.images:
            dts[int(d["image_id"]), int(d["category_id"])].append(d)
    cats = data.category_ids
    rows = []
    for c in cats:
        evals = []
        for i in sorted(data.images):
            e = _evaluate_image(gts.get((i, c), []), dts.get((i, c), []))
            if e is not None:
                evals.append(e)
        rows.append(_average_precision(evals))
    ap = np.array(rows).reshape(len(cats), len(IOU_THRESHOLDS))
    return DetectionMetrics(ap, cats, len(data.images))
