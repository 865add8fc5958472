"""Non-max suppression: NON_MAX_SUPPRESSION_V4 and V5.

Follows TFLite's reference NonMaxSuppression (tflite/kernels/internal/reference/
non_max_suppression.h): candidates above the score threshold wait in a max-heap of scores;
the best is compared with the boxes selected so far (newest first), dropped when an IoU
reaches the IoU threshold, else (soft NMS, V5) its score decays by exp(-iou^2 / (2 sigma))
and it goes back into the heap unless it fell to the score threshold. The heap reproduces
libstdc++'s std::priority_queue step by step, so equal scores come out in LiteRT's order.
Arithmetic is float32, as TFLite's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import OpContext, register
from .shape import check_output, op_error, require_dtype, required_input

F32 = np.float32


@dataclass
class _Candidate:
    index: int
    score: np.float32
    suppress_begin: int = 0


class _ScoreHeap:
    """std::priority_queue<_Candidate> ordered by score, with libstdc++'s push_heap and
    pop_heap (__push_heap, __adjust_heap), so that ties leave in the same order."""

    def __init__(self) -> None:
        self.c: list[_Candidate] = []

    def __len__(self) -> int:
        return len(self.c)

    def push(self, item: _Candidate) -> None:
        self.c.append(item)
        self._sift_up(len(self.c) - 1, 0, item)

    def pop(self) -> _Candidate:
        top, last = self.c[0], self.c.pop()
        if self.c:
            self._adjust(len(self.c), last)
        return top

    def _sift_up(self, hole: int, top: int, value: _Candidate) -> None:
        parent = (hole - 1) // 2
        while hole > top and self.c[parent].score < value.score:
            self.c[hole] = self.c[parent]
            hole = parent
            parent = (hole - 1) // 2
        self.c[hole] = value

    def _adjust(self, length: int, value: _Candidate) -> None:
        """Refill the hole at the root of c[:length] and sift `value` into place."""
        hole = second = 0
        while second < (length - 1) // 2:
            second = 2 * (second + 1)
            if self.c[second].score < self.c[second - 1].score:
                second -= 1
            self.c[hole] = self.c[second]
            hole = second
        if length % 2 == 0 and second == (length - 2) // 2:
            second = 2 * (second + 1)
            self.c[hole] = self.c[second - 1]
            hole = second - 1
        self._sift_up(hole, 0, value)


class _Boxes:
    """Corner boxes [y1, x1, y2, x2] with their float32 extents and areas."""

    def __init__(self, boxes: np.ndarray):
        self.ymin = np.minimum(boxes[:, 0], boxes[:, 2])
        self.ymax = np.maximum(boxes[:, 0], boxes[:, 2])
        self.xmin = np.minimum(boxes[:, 1], boxes[:, 3])
        self.xmax = np.maximum(boxes[:, 1], boxes[:, 3])
        self.area = (self.ymax - self.ymin) * (self.xmax - self.xmin)

    def iou(self, i: int, others: np.ndarray) -> np.ndarray:
        """Float32 IoU of box i with each box of `others` (0 where an area is not positive)."""
        h = np.maximum(
            np.minimum(self.ymax[i], self.ymax[others])
            - np.maximum(self.ymin[i], self.ymin[others]),
            F32(0),
        )
        w = np.maximum(
            np.minimum(self.xmax[i], self.xmax[others])
            - np.maximum(self.xmin[i], self.xmin[others]),
            F32(0),
        )
        inter = h * w
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (self.area[i] + self.area[others] - inter)
        empty = (self.area[i] <= 0) | (self.area[others] <= 0)
        return np.where(empty, F32(0), iou).astype(F32)


def _suppress(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_output: int,
    iou_threshold: np.float32,
    score_threshold: np.float32,
    sigma: np.float32,
) -> tuple[list[int], list[np.float32]]:
    """The selected box indices and their (possibly decayed) scores, in selection order."""
    heap = _ScoreHeap()
    for i in np.flatnonzero(scores > score_threshold):
        heap.push(_Candidate(int(i), scores[i]))
    wanted = min(len(heap), max_output)
    scale = F32(-0.5 / float(sigma)) if sigma > 0 else F32(0)
    geometry = _Boxes(boxes)
    selected: list[int] = []
    kept: list[np.float32] = []
    while len(selected) < wanted and len(heap):
        candidate = heap.pop()
        original = candidate.score
        earlier = np.array(selected[candidate.suppress_begin :][::-1], np.int64)
        ious = geometry.iou(candidate.index, earlier) if earlier.size else earlier
        hard = False
        for iou in ious:
            if iou >= iou_threshold:
                hard = True
                break
            if sigma > 0:
                candidate.score = F32(candidate.score * np.exp(F32(F32(scale * iou) * iou)))
            if candidate.score <= score_threshold:
                break
        candidate.suppress_begin = len(selected)
        if hard:
            continue
        if candidate.score == original:
            selected.append(candidate.index)
            kept.append(candidate.score)
        if candidate.score > score_threshold:
            heap.push(candidate)
    return selected, kept


def _scalar(ctx: OpContext, i: int, what: str, dtype: type) -> np.generic:
    x = required_input(ctx, i, what)
    require_dtype(ctx, x, (dtype,), what)
    if x.size != 1:
        raise op_error(ctx, f"{what} must be a scalar, got shape {list(x.shape)}")
    return x.reshape(())[()]


def _nms(ctx: OpContext, soft: bool) -> list[np.ndarray]:
    boxes = required_input(ctx, 0, "boxes")
    scores = required_input(ctx, 1, "scores")
    require_dtype(ctx, boxes, (F32,), "boxes")
    require_dtype(ctx, scores, (F32,), "scores")
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise op_error(ctx, f"boxes must be [num_boxes, 4], got {list(boxes.shape)}")
    if scores.shape != boxes.shape[:1]:
        raise op_error(ctx, f"scores {list(scores.shape)} for {boxes.shape[0]} boxes")
    max_output = int(_scalar(ctx, 2, "max_output_size", np.int32))
    iou_threshold = F32(_scalar(ctx, 3, "iou_threshold", F32))
    score_threshold = F32(_scalar(ctx, 4, "score_threshold", F32))
    sigma = F32(_scalar(ctx, 5, "soft_nms_sigma", F32)) if soft else F32(0)
    if max_output < 0:
        raise op_error(ctx, f"max_output_size {max_output} is negative")
    if sigma < 0:
        raise op_error(ctx, f"soft_nms_sigma {float(sigma)} is negative")
    check_output(ctx, (max_output,), np.int32, "selected indices")
    chosen, kept = _suppress(boxes, scores, max_output, iou_threshold, score_threshold, sigma)
    indices = np.zeros(max_output, np.int32)
    indices[: len(chosen)] = chosen
    count = np.array(len(chosen), np.int32)
    if not soft:
        return [indices, count]
    selected_scores = np.zeros(max_output, F32)
    selected_scores[: len(kept)] = kept
    return [indices, selected_scores, count]


@register("NON_MAX_SUPPRESSION_V4", versions=(1,))
def non_max_suppression_v4(ctx: OpContext) -> list[np.ndarray]:
    """NON_MAX_SUPPRESSION_V4: indices of the boxes kept by greedy NMS, best score first,
    padded with zeros to max_output_size, and how many are valid."""
    return _nms(ctx, soft=False)


@register("NON_MAX_SUPPRESSION_V5", versions=(1,))
def non_max_suppression_v5(ctx: OpContext) -> list[np.ndarray]:
    """NON_MAX_SUPPRESSION_V5: soft NMS (Gaussian decay by soft_nms_sigma; 0 is plain NMS):
    the kept indices and their scores, zero-padded to max_output_size, and the count."""
    return _nms(ctx, soft=True)
