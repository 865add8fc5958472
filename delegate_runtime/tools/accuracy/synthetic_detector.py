"""A small SSD-style .tflite detector for the synthetic detection dataset, written with the
builder: hand-chosen weights, no training, ending with TFLite_Detection_PostProcess.

- Colour masks: a 1x1 CONV_2D (fused RELU) turns each (pixel - 127.5) / 127.5 input pixel
  into one value per category, 1.0 on that category's colour and 0 on the dark background
  and the other colours (own channel minus the others, past a threshold).
- Anchors: a grid of boxes of several heights and widths (even pixel sizes spanning the
  generator's object sizes), at a stride of about a sixth of their short side.
- Scores: for each anchor A (h x w) and the window B around it twice as high and wide,
  inner = mean mask over A and outer = mean mask over B (separable AVERAGE_POOL_2Ds; B
  over a zero-PADded mask). When one object O of the colour lies within B,
  |O| = |O∩A| + |O∩(B\\A)|, so IoU(A, O) = inner / (1 + 4 * outer - inner): the score is
  the anchor's IoU with the object (MUL, ADD, SUB, DIV).
- Scores of all anchors are RESHAPEd and concatenated into [1, anchors, categories], a
  zero background column is PADded in front, and the box encodings are a zero constant,
  so the post-processing's decoded boxes are the anchors; fast NMS keeps the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...builder import SubgraphBuilder

#: Background pixel mean of the generator (it draws N(30, 12) per channel).
BACKGROUND_LEVEL = 30.0
#: Least distance of a mask's threshold above the background's value (noise sd about 21).
BACKGROUND_MARGIN = 60.0
#: A mask's threshold as a fraction of its colour's own value (0 below it, 1 at the colour).
MASK_THRESHOLD_FRACTION = 0.4
#: Anchor sizes per dimension, spread geometrically over the object size range.
SIZES_PER_DIM = 5
POSTPROCESS_OPTIONS = dict(
    max_detections=10,
    max_classes_per_detection=1,
    detections_per_class=10,
    nms_score_threshold=0.3,
    nms_iou_threshold=0.5,
    y_scale=10.0,
    x_scale=10.0,
    h_scale=5.0,
    w_scale=5.0,
    use_regular_nms=False,
)


@dataclass(frozen=True)
class AnchorShape:
    """One anchor size (pixels) with its grid stride and grid size."""

    h: int
    w: int
    stride: int
    rows: int
    cols: int


def anchor_sizes(lo: int, hi: int, n: int = SIZES_PER_DIM) -> list[int]:
    """n even sizes from lo to hi (geometric), distinct."""
    sizes = np.geomspace(max(lo, 2), max(hi, lo + 2), n)
    return sorted({max(2, 2 * int(round(s / 2))) for s in sizes})


def anchor_shapes(width: int, height: int) -> list[AnchorShape]:
    """The anchor grid for the generator's objects (w in [W/8, W/2), h in [H/8, H/2))."""
    shapes = []
    for h in anchor_sizes(height // 8, height // 2 - 2):
        for w in anchor_sizes(width // 8, width // 2 - 2):
            s = max(2, min(h, w) // 6)
            shapes.append(AnchorShape(h, w, s, (height - h) // s + 1, (width - w) // s + 1))
    return shapes


def anchors_of(shape: AnchorShape, width: int, height: int) -> np.ndarray:
    """[rows * cols, 4] anchors (ycenter, xcenter, h, w), normalised, row-major."""
    yc = (np.arange(shape.rows) * shape.stride + shape.h / 2) / height
    xc = (np.arange(shape.cols) * shape.stride + shape.w / 2) / width
    y, x = np.meshgrid(yc, xc, indexing="ij")
    hw = np.broadcast_to([shape.h / height, shape.w / width], (y.size, 2))
    return np.column_stack([y.ravel(), x.ravel(), hw]).astype(np.float32)


def mask_weights(colours: Sequence[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """1x1 conv filter [C, 1, 1, 3] and bias [C] of the colour masks on normalised inputs."""
    filters, biases = [], []
    for colour in colours:
        rgb = np.asarray(colour, np.float64)
        w = -np.ones(3)
        w[int(np.argmax(rgb))] = 1.0
        own = float(w @ rgb)
        background = float(w @ np.full(3, BACKGROUND_LEVEL))
        threshold = max(MASK_THRESHOLD_FRACTION * own, background + BACKGROUND_MARGIN)
        others = [float(w @ np.asarray(c, np.float64)) for c in colours if c != colour]
        if own <= threshold or any(v >= threshold for v in others):
            raise ValueError(f"colour {colour} cannot be told apart by its own channel")
        scale = 1.0 / (own - threshold)
        filters.append(127.5 * w * scale)  # pixel = 127.5 * x + 127.5
        biases.append((127.5 * w.sum() - threshold) * scale)
    return (
        np.asarray(filters, np.float32).reshape(len(colours), 1, 1, 3),
        np.asarray(biases, np.float32),
    )


def _pool(
    g: SubgraphBuilder,
    x: int,
    in_hw: tuple[int, int],
    channels: int,
    k: tuple[int, int],
    s: int,
    name: str,
) -> int:
    """Mean over k-sized VALID windows at stride s, as a column pool then a row pool."""
    out_h = (in_hw[0] - k[0]) // s + 1
    out_w = (in_hw[1] - k[1]) // s + 1
    cols = g.tensor(f"{name}_v", (1, out_h, in_hw[1], channels))
    g.op(
        "AVERAGE_POOL_2D",
        [x],
        [cols],
        padding="VALID",
        stride_h=s,
        stride_w=1,
        filter_height=k[0],
        filter_width=1,
    )
    out = g.tensor(f"{name}_h", (1, out_h, out_w, channels))
    g.op(
        "AVERAGE_POOL_2D",
        [cols],
        [out],
        padding="VALID",
        stride_h=1,
        stride_w=s,
        filter_height=1,
        filter_width=k[1],
    )
    return out


def _binary(g: SubgraphBuilder, op: str, a: int, b: int, shape: tuple, name: str) -> int:
    out = g.tensor(name, shape)
    g.op(op, [a, b], [out])
    return out


def _anchor_scores(
    g: SubgraphBuilder, mask: int, shape: AnchorShape, hw: tuple[int, int], c: int
) -> int:
    """[1, rows * cols, c] IoU estimates of one anchor shape's grid, per category."""
    name = f"a{shape.h}x{shape.w}"
    inner = _pool(g, mask, hw, c, (shape.h, shape.w), shape.stride, f"{name}_inner")
    ph, pw = shape.h // 2, shape.w // 2
    padded_hw = (hw[0] + 2 * ph, hw[1] + 2 * pw)
    padded = g.tensor(f"{name}_padded", (1, *padded_hw, c))
    pads = np.array([[0, 0], [ph, ph], [pw, pw], [0, 0]], np.int32)
    g.op("PAD", [mask, g.const(f"{name}_pads", pads)], [padded])
    k = (2 * shape.h, 2 * shape.w)
    outer = _pool(g, padded, padded_hw, c, k, shape.stride, f"{name}_outer")
    grid = (1, shape.rows, shape.cols, c)
    four = g.const(f"{name}_four", np.float32(4.0))
    one = g.const(f"{name}_one", np.float32(1.0))
    scaled = _binary(g, "MUL", outer, four, grid, f"{name}_outer4")
    plus_one = _binary(g, "ADD", scaled, one, grid, f"{name}_outer4p1")
    union = _binary(g, "SUB", plus_one, inner, grid, f"{name}_union")
    iou = _binary(g, "DIV", inner, union, grid, f"{name}_iou")
    flat = g.tensor(f"{name}_scores", (1, shape.rows * shape.cols, c))
    new_shape = [1, shape.rows * shape.cols, c]
    g.op(
        "RESHAPE",
        [iou, g.const(f"{name}_shape", np.array(new_shape, np.int32))],
        [flat],
        new_shape=new_shape,
    )
    return flat


def ssd_detector(colours: Sequence[tuple[int, int, int]], width: int, height: int) -> bytes:
    """A .tflite detector of solid `colours` rectangles in [1, height, width, 3] images
    normalised as (pixel - 127.5) / 127.5; outputs boxes, classes, scores, count."""
    from flatbuffers import flexbuffers

    from ...builder import ModelBuilder

    c = len(colours)
    b = ModelBuilder(description="devicefarm synthetic SSD-style detector")
    g = b.main
    x = g.input("image", (1, height, width, 3), np.float32)
    filters, bias = mask_weights(colours)
    mask = g.tensor("colour_masks", (1, height, width, c))
    g.op(
        "CONV_2D",
        [x, g.const("mask_filter", filters), g.const("mask_bias", bias)],
        [mask],
        padding="VALID",
        stride_w=1,
        stride_h=1,
        fused_activation_function="RELU",
    )
    shapes = anchor_shapes(width, height)
    parts = [_anchor_scores(g, mask, s, (height, width), c) for s in shapes]
    anchors = np.concatenate([anchors_of(s, width, height) for s in shapes])
    n = len(anchors)
    scores = g.tensor("class_scores", (1, n, c))
    g.op("CONCATENATION", parts, [scores], axis=1)
    with_background = g.tensor("class_predictions", (1, n, c + 1))
    pads = np.array([[0, 0], [0, 0], [1, 0]], np.int32)
    g.op("PAD", [scores, g.const("background_pads", pads)], [with_background])
    opts = POSTPROCESS_OPTIONS | {"num_classes": c}
    rows = opts["max_detections"] * opts["max_classes_per_detection"]
    outs = [
        g.tensor("detection_boxes", (1, rows, 4)),
        g.tensor("detection_classes", (1, rows)),
        g.tensor("detection_scores", (1, rows)),
        g.tensor("num_detections", (1,)),
    ]
    g.custom_op(
        "TFLite_Detection_PostProcess",
        [
            g.const("box_encodings", np.zeros((1, n, 4), np.float32)),
            with_background,
            g.const("anchors", anchors),
        ],
        outs,
        custom_options=flexbuffers.Dumps(opts),
    )
    g.output(*outs)
    return b.build()
