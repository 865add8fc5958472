"""TFLite_Detection_PostProcess, the custom op that ends converted SSD models.

Inputs: box encodings [1, A, >=4] (ty, tx, th, tw), class predictions [1, A, C or C+1]
(background first when C+1; float32, or uint8/int8 dequantized), anchors [A, 4]
(ycenter, xcenter, h, w). Outputs (float32): boxes [1, D*K, 4] (ymin, xmin, ymax, xmax),
classes [1, D*K], scores [1, D*K], num_detections [1], where D = max_detections and
K = max_classes_per_detection. Options come as a flexbuffer map in custom_options.

Decoding (TFLite's DecodeCenterSizeBoxes, in double, rounded to float32):
ycenter = ty / y_scale * ha + ya, xcenter = tx / x_scale * wa + xa,
half_h = 0.5 * exp(th / h_scale) * ha, half_w = 0.5 * exp(tw / w_scale) * wa.

NMS follows TFLite's reference kernel rule for rule: scores >= nms_score_threshold are
kept, sorted by decreasing score (stable: ties keep anchor order), greedily selected,
suppressing later boxes whose float32 IoU is > nms_iou_threshold (0 when either box has
no area). Fast NMS (the default) ranks each anchor by its best class and reports its top K
classes (ties among an anchor's classes broken as libstdc++'s std::partial_sort breaks
them); regular NMS (use_regular_nms) runs NMS per class (min(detections_per_class, D)
each) and keeps the best D over all classes, merged stably class by class as LiteRT does
single-threaded. Slots without a detection hold zeros (LiteRT leaves fast NMS's unwritten).
int8 inputs are an extension: LiteRT's kernel takes uint8 only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..graph import Tensor
from .common import dequantize, quant_params
from .registry import OpContext, register

OP_NAME = "CUSTOM:TFLite_Detection_PostProcess"
#: detections_per_class when the options leave it out (TFLite's kNumDetectionsPerClass).
DEFAULT_DETECTIONS_PER_CLASS = 100
#: Cap on output rows (max_detections * max_classes_per_detection) from untrusted options.
MAX_OUTPUT_ROWS = 1 << 24


@dataclass(frozen=True)
class DetectionOptions:
    """The op's flexbuffer options, with TFLite's defaults for missing keys."""

    max_detections: int = 0
    max_classes_per_detection: int = 0
    detections_per_class: int = DEFAULT_DETECTIONS_PER_CLASS
    nms_score_threshold: float = 0.0  #: float32 value
    nms_iou_threshold: float = 0.0  #: float32 value
    num_classes: int = 0
    y_scale: float = 0.0
    x_scale: float = 0.0
    h_scale: float = 0.0
    w_scale: float = 0.0
    use_regular_nms: bool = False


def parse_options(raw: bytes | None) -> DetectionOptions:
    """DetectionOptions from the operator's flexbuffer custom options."""
    from flatbuffers import flexbuffers

    if not raw:
        raise ModelError(f"{OP_NAME} has no custom options")
    try:
        m = flexbuffers.Loads(bytes(raw))
    except Exception as exc:  # the flexbuffers runtime raises assorted errors on bad bytes
        raise ModelError(f"{OP_NAME}: custom options are not a flexbuffer: {exc}") from exc
    if not isinstance(m, dict):
        raise ModelError(f"{OP_NAME}: custom options are not a flexbuffer map")

    def num(key: str, kind: type, default: float | int | bool) -> float | int | bool:
        value = m.get(key)
        if value is None:
            return default
        try:
            return float(np.float32(value)) if kind is float else kind(value)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{OP_NAME}: option {key}={value!r} is not a number") from exc

    fields = DetectionOptions.__dataclass_fields__
    return DetectionOptions(**{k: num(k, type(f.default), f.default) for k, f in fields.items()})


# -- decoding ------------------------------------------------------------------------------


def _as_float(x: np.ndarray, t: Tensor | None, what: str) -> np.ndarray:
    """Float32 values of an input: float32 as is, uint8/int8 dequantized."""
    if x.dtype == np.float32:
        return x
    if x.dtype in (np.uint8, np.int8):
        return dequantize(x, quant_params(t, what))
    raise ModelError(f"{OP_NAME}: {what} of type {x.dtype} is not supported")


def decode_boxes(encodings: np.ndarray, anchors: np.ndarray, o: DetectionOptions) -> np.ndarray:
    """Corner boxes [A, 4] (ymin, xmin, ymax, xmax), float32, from center-size encodings."""
    ty, tx, th, tw = (encodings[:, i].astype(np.float64) for i in range(4))
    ya, xa, ha, wa = (anchors[:, i].astype(np.float64) for i in range(4))
    with np.errstate(all="ignore"):
        yc = (ty / o.y_scale * ha + ya).astype(np.float32)
        xc = (tx / o.x_scale * wa + xa).astype(np.float32)
        half_h = (0.5 * np.exp(th / o.h_scale) * ha).astype(np.float32)
        half_w = (0.5 * np.exp(tw / o.w_scale) * wa).astype(np.float32)
        return np.stack([yc - half_h, xc - half_w, yc + half_h, xc + half_w], axis=1)


def iou_with(boxes: np.ndarray, i: int, others: np.ndarray) -> np.ndarray:
    """Float32 IoU of box i with boxes[others], as TFLite computes it."""
    a, b = boxes[i], boxes[others]
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    zero = np.float32(0)
    ih = np.maximum(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), zero)
    iw = np.maximum(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), zero)
    inter = ih * iw
    with np.errstate(all="ignore"):
        iou = inter / (area_a + area_b - inter)
    return np.where((area_a <= 0) | (area_b <= 0), zero, iou)


# -- TFLite's sorts --------------------------------------------------------------------------


def partial_argsort(values: Sequence[float] | np.ndarray, k: int) -> list[int]:
    """Indices of the k largest values, decreasing: TFLite's DecreasingPartialArgSort (argmax
    for k == 1, else std::partial_sort, whose tie order libstdc++'s heap algorithm fixes)."""
    vals = np.asarray(values, np.float32)
    if k <= 0 or vals.size == 0:
        return []
    if k == 1:
        return [int(np.argmax(vals))]  # ArgMaxVector: the first maximum
    if np.unique(vals).size == vals.size:  # no ties: any correct sort agrees
        return [int(i) for i in np.argsort(-vals, kind="stable")[:k]]
    v = vals.tolist()
    order = list(range(len(v)))
    _heap_partial_sort(order, k, lambda a, b: v[a] > v[b])
    return order[:k]


def _heap_partial_sort(a: list[int], middle: int, comp: Callable[[int, int], bool]) -> None:
    """libstdc++'s std::partial_sort(a, a + middle, a + len(a), comp): heap select, sort heap."""
    _make_heap(a, middle, comp)
    for i in range(middle, len(a)):
        if comp(a[i], a[0]):
            _pop_heap(a, middle, i, comp)
    for last in range(middle - 1, 0, -1):
        _pop_heap(a, last, last, comp)


def _make_heap(a: list[int], length: int, comp: Callable[[int, int], bool]) -> None:
    if length < 2:
        return
    for parent in range((length - 2) // 2, -1, -1):
        _adjust_heap(a, parent, length, a[parent], comp)


def _pop_heap(a: list[int], length: int, result: int, comp: Callable[[int, int], bool]) -> None:
    value = a[result]
    a[result] = a[0]
    _adjust_heap(a, 0, length, value, comp)


def _adjust_heap(
    a: list[int], hole: int, length: int, value: int, comp: Callable[[int, int], bool]
) -> None:
    top = second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if comp(a[second], a[second - 1]):
            second -= 1
        a[hole] = a[second]
        hole = second
    if length % 2 == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        a[hole] = a[second - 1]
        hole = second - 1
    parent = (hole - 1) // 2
    while hole > top and comp(a[parent], value):
        a[hole] = a[parent]
        hole = parent
        parent = (hole - 1) // 2
    a[hole] = value


# -- non-max suppression ----------------------------------------------------------------------


def nms_single_class(
    boxes: np.ndarray, scores: np.ndarray, o: DetectionOptions, max_detections: int
) -> list[int]:
    """Anchors kept by greedy NMS on one score per anchor, best first."""
    keep = np.flatnonzero(scores >= np.float32(o.nms_score_threshold))
    order = keep[np.argsort(-scores[keep], kind="stable")]
    limit = min(len(order), max_detections)
    active = np.ones(len(order), bool)
    iou_threshold = np.float32(o.nms_iou_threshold)
    selected: list[int] = []
    for i in range(len(order)):
        if len(selected) >= limit:
            break
        if not active[i]:
            continue
        selected.append(int(order[i]))
        rest = np.flatnonzero(active[i + 1 :]) + i + 1
        if rest.size:
            active[rest[iou_with(boxes, order[i], order[rest]) > iou_threshold]] = False
    return selected


def nms_fast(
    boxes: np.ndarray, scores: np.ndarray, o: DetectionOptions, offset: int
) -> list[tuple[int, int, int]]:
    """(output row, anchor, class) of class-agnostic NMS on each anchor's best class."""
    per_anchor = min(o.max_classes_per_detection, o.num_classes)
    classes = scores[:, offset : offset + o.num_classes]
    if per_anchor == 1:
        top = np.argmax(classes, axis=1)[:, None]
    else:
        top = np.array([partial_argsort(row, per_anchor) for row in classes], np.int64)
    best = classes[np.arange(len(classes)), top[:, 0]]
    selected = nms_single_class(boxes, best, o, o.max_detections)
    return [
        (o.max_classes_per_detection * k + col, anchor, int(top[anchor, col]))
        for k, anchor in enumerate(selected)
        for col in range(per_anchor)
    ]


def nms_regular(
    boxes: np.ndarray, scores: np.ndarray, o: DetectionOptions, offset: int
) -> list[tuple[int, int, int]]:
    """(output row, anchor, class) of per-class NMS, the best max_detections over classes.

    Each class's picks are merged into the running list stably (earlier classes first on
    ties), as LiteRT's single-threaded std::inplace_merge does."""
    per_class = min(o.detections_per_class, o.max_detections)
    kept: list[tuple[float, int, int]] = []  #: (score, anchor, class), best first
    for col in range(o.num_classes):
        class_scores = scores[:, offset + col]
        chosen = nms_single_class(boxes, class_scores, o, per_class)
        kept += [(float(class_scores[a]), a, col) for a in chosen]
        kept = sorted(kept, key=lambda k: -k[0])[: o.max_detections]  # stable
    return [(row, anchor, col) for row, (_, anchor, col) in enumerate(kept)]


# -- the kernel --------------------------------------------------------------------------------


def _check(ctx: OpContext, o: DetectionOptions) -> None:
    if len(ctx.inputs) != 3 or len(ctx.op.outputs) != 4:
        raise ModelError(f"{OP_NAME} takes 3 inputs and gives 4 outputs")
    enc, cls, anchors = ctx.inputs
    if enc.ndim != 3 or cls.ndim != 3 or anchors.ndim != 2:
        raise ModelError(
            f"{OP_NAME}: box encodings and class predictions must be rank 3, anchors rank 2; "
            f"got {list(enc.shape)}, {list(cls.shape)}, {list(anchors.shape)}"
        )
    n = enc.shape[1]
    if enc.shape[0] != 1 or cls.shape[0] != 1 or enc.shape[2] < 4:
        raise ModelError(f"{OP_NAME}: batch must be 1 and box encodings need 4 values")
    if cls.shape[1] != n or anchors.shape[0] < n or anchors.shape[1] != 4:
        raise ModelError(f"{OP_NAME}: {n} boxes but class predictions or anchors disagree")
    if o.num_classes <= 0 or cls.shape[2] - o.num_classes not in (0, 1):
        raise ModelError(
            f"{OP_NAME}: {cls.shape[2]} class scores per anchor for num_classes={o.num_classes}"
        )
    if o.max_detections < 0 or not 0.0 < o.nms_iou_threshold <= 1.0:
        raise ModelError(f"{OP_NAME}: needs max_detections >= 0 and an IoU threshold in (0, 1]")
    if o.max_detections * max(o.max_classes_per_detection, 1) > MAX_OUTPUT_ROWS:
        raise ModelError(f"{OP_NAME}: more than {MAX_OUTPUT_ROWS} output rows")
    if o.use_regular_nms and min(o.detections_per_class, o.max_detections) <= 0:
        raise ModelError(
            f"{OP_NAME}: regular NMS needs positive detections_per_class and max_detections"
        )
    if not o.use_regular_nms and o.max_classes_per_detection <= 0:
        raise ModelError(f"{OP_NAME}: max_classes_per_detection must be positive")


def _outputs(
    boxes: np.ndarray,
    scores: np.ndarray,
    rows: list[tuple[int, int, int]],
    count: int,
    o: DetectionOptions,
) -> list[np.ndarray]:
    """The four outputs, unused slots zero."""
    n = o.max_detections * max(o.max_classes_per_detection, 0)
    out_boxes = np.zeros((1, n, 4), np.float32)
    out_classes = np.zeros((1, n), np.float32)
    out_scores = np.zeros((1, n), np.float32)
    offset = scores.shape[1] - o.num_classes
    for row, anchor, col in rows:
        if row < n:  # regular NMS with max_classes_per_detection 0 has no room (as TFLite)
            out_boxes[0, row] = boxes[anchor]
            out_classes[0, row] = col
            out_scores[0, row] = scores[anchor, offset + col]
    return [out_boxes, out_classes, out_scores, np.array([count], np.float32)]


@register(OP_NAME, versions=(1,))
def detection_postprocess(ctx: OpContext) -> list[np.ndarray]:
    """Decode SSD box encodings against anchors, then fast or regular multi-class NMS."""
    o = parse_options(ctx.opt("custom_options"))
    _check(ctx, o)
    enc, cls, anchors = ctx.inputs
    n = enc.shape[1]
    enc_f = _as_float(enc[0, :, :4], ctx.in_tensors[0], "box encodings")
    anchors_f = _as_float(anchors[:n], ctx.in_tensors[2], "anchors")
    scores = _as_float(cls[0], ctx.in_tensors[1], "class predictions")
    boxes = decode_boxes(enc_f, anchors_f, o)
    if np.any(boxes[:, 0] > boxes[:, 2]) or np.any(boxes[:, 1] > boxes[:, 3]):
        raise ModelError(f"{OP_NAME}: a decoded box has ymin > ymax or xmin > xmax")
    offset = scores.shape[1] - o.num_classes
    if o.use_regular_nms:
        rows = nms_regular(boxes, scores, o, offset)
        count = len(rows)
    else:
        rows = nms_fast(boxes, scores, o, offset)
        count = len({anchor for _, anchor, _ in rows})  # one per selected anchor
    return _outputs(boxes, scores, rows, count, o)
