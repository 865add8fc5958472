"""TFLite_Detection_PostProcess (custom op) against LiteRT: fast and regular NMS, float and
quantized inputs, thresholds, ties. LiteRT leaves slots without a detection unwritten, so
only the rows it writes are compared; ours must hold zeros in the others."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import run_litert, run_ours
from flatbuffers import flexbuffers

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from delegate_runtime.errors import ModelError
from delegate_runtime.ops.detection import parse_options, partial_argsort

BASE = dict(
    max_detections=5,
    max_classes_per_detection=1,
    detections_per_class=3,
    nms_score_threshold=0.3,
    nms_iou_threshold=0.5,
    num_classes=3,
    y_scale=10.0,
    x_scale=10.0,
    h_scale=5.0,
    w_scale=5.0,
    use_regular_nms=False,
)
#: name -> (option overrides, anchors, background column, class dtype, score levels)
#: score levels: 0 draws uniform floats / all uint8 codes; n > 0 draws n levels (many ties).
CASES: dict[str, tuple[dict[str, Any], int, int, str, int]] = {
    "fast_k1_float": ({}, 20, 1, "float32", 0),
    "fast_k2_float": (dict(max_classes_per_detection=2), 20, 1, "float32", 0),
    "fast_k3_of_2_classes": (dict(max_classes_per_detection=3, num_classes=2), 16, 1, "float32", 0),
    "fast_no_background": ({}, 20, 0, "float32", 0),
    "fast_many_anchors": (dict(max_detections=10), 300, 1, "float32", 0),
    "fast_low_iou": (dict(nms_iou_threshold=0.1), 40, 1, "float32", 0),
    "fast_iou_one": (dict(nms_iou_threshold=1.0), 20, 1, "float32", 0),
    "fast_nothing_scores": (dict(nms_score_threshold=0.99), 20, 1, "float32", 0),
    "fast_k1_uint8": ({}, 40, 1, "uint8", 0),
    "fast_k2_uint8_ties": (dict(max_classes_per_detection=2, num_classes=4), 40, 1, "uint8", 4),
    "fast_k3_uint8_ties": (dict(max_classes_per_detection=3, num_classes=6), 40, 1, "uint8", 3),
    "fast_k2_int8": (dict(max_classes_per_detection=2), 30, 1, "int8", 0),
    "regular_float": (dict(use_regular_nms=True), 30, 1, "float32", 0),
    "regular_float_k2": (
        dict(use_regular_nms=True, max_classes_per_detection=2),
        30,
        1,
        "float32",
        0,
    ),
    "regular_one_per_class": (
        dict(use_regular_nms=True, detections_per_class=1),
        30,
        1,
        "float32",
        0,
    ),
    "regular_max_one": (dict(use_regular_nms=True, max_detections=1), 30, 1, "float32", 0),
    "regular_uint8": (dict(use_regular_nms=True), 40, 1, "uint8", 0),
    "regular_uint8_ties": (
        dict(use_regular_nms=True, num_classes=5, max_detections=8, detections_per_class=4),
        60,
        1,
        "uint8",
        3,
    ),
    "regular_int8": (dict(use_regular_nms=True, nms_score_threshold=0.1), 30, 0, "int8", 0),
    "regular_high_threshold": (
        dict(use_regular_nms=True, nms_score_threshold=0.9, nms_iou_threshold=0.3),
        50,
        1,
        "float32",
        0,
    ),
    "defaults_when_left_out": (
        {"detections_per_class": None, "use_regular_nms": None},
        20,
        1,
        "float32",
        0,
    ),
}
#: uint8 class predictions: real = (q - 0) / 255
UINT8_QUANT = Quant(1 / 255, 0)
#: int8 with the same real values: q8 = q - 128, zero point -128
INT8_QUANT = Quant(1 / 255, -128)


def options(overrides: dict[str, Any]) -> dict[str, Any]:
    opts = BASE | overrides
    return {k: v for k, v in opts.items() if v is not None}


def anchors(n: int, seed: int = 1) -> np.ndarray:
    """Anchors (ycenter, xcenter, h, w) in a loose grid, some overlapping."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0.15, 0.85, (n, 2))
    size = rng.uniform(0.1, 0.5, (n, 2))
    return np.concatenate([centre, size], axis=1).astype(np.float32)


def build(
    opts: dict[str, Any],
    n: int,
    columns: int,
    class_dtype: str,
    box_dtype: str = "float32",
    anchor_values: np.ndarray | None = None,
    declared_rows: int | None = None,
) -> bytes:
    """A one-op model: box encodings and class predictions in, the four outputs out."""
    b = ModelBuilder()
    g = b.main
    box_quant = Quant(0.05, 128) if box_dtype == "uint8" else None
    box = g.input("box_encodings", (1, n, 4), box_dtype, quant=box_quant)
    cls_quant = {"uint8": UINT8_QUANT, "int8": INT8_QUANT}.get(class_dtype)
    cls = g.input("class_predictions", (1, n, columns), class_dtype, quant=cls_quant)
    a = anchors(n) if anchor_values is None else anchor_values
    if box_dtype == "uint8":
        anchor_const = g.const("anchors", np.round(a / 0.004).astype(np.uint8), Quant(0.004, 0))
    else:
        anchor_const = g.const("anchors", a)
    rows = declared_rows or opts["max_detections"] * opts["max_classes_per_detection"]
    outs = [
        g.tensor("detection_boxes", (1, rows, 4)),
        g.tensor("detection_classes", (1, rows)),
        g.tensor("detection_scores", (1, rows)),
        g.tensor("num_detections", (1,)),
    ]
    g.custom_op(
        "TFLite_Detection_PostProcess",
        [box, cls, anchor_const],
        outs,
        custom_options=flexbuffers.Dumps(opts),
    )
    g.output(*outs)
    return b.build()


def inputs(n: int, columns: int, class_dtype: str, levels: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    boxes = rng.normal(0, 2, (1, n, 4)).astype(np.float32)
    if class_dtype == "float32":
        return [boxes, rng.uniform(0, 1, (1, n, columns)).astype(np.float32)]
    if levels:
        q = rng.choice(np.linspace(60, 250, levels).astype(np.int64), (1, n, columns))
    else:
        q = rng.integers(0, 256, (1, n, columns))
    return [boxes, q.astype(np.uint8)]


def to_int8(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.int16) - 128).astype(np.int8)


def written_rows(opts: dict[str, Any], count: int) -> list[int]:
    """Rows TFLite writes: per selected anchor its top classes (fast), or the first
    max_detections (regular, zeros past the count)."""
    if opts.get("use_regular_nms"):
        return list(range(opts["max_detections"]))
    k = opts["max_classes_per_detection"]
    per_anchor = min(k, opts["num_classes"])
    return [i * k + c for i in range(count) for c in range(per_anchor)]


@pytest.mark.parametrize("case", CASES, ids=CASES.keys())
def test_matches_litert(case: str) -> None:
    overrides, n, background, class_dtype, levels = CASES[case]
    opts = options(overrides)
    columns = opts["num_classes"] + background
    xs = inputs(n, columns, class_dtype, levels)
    # NOTE: LiteRT's kernel takes uint8 class predictions only; int8 ones carry the same
    # real values, so LiteRT runs the uint8 twin of the model.
    litert_dtype = "uint8" if class_dtype == "int8" else class_dtype
    expected = run_litert(build(opts, n, columns, litert_dtype), xs)
    ours_in = [xs[0], to_int8(xs[1])] if class_dtype == "int8" else xs
    got = run_ours(build(opts, n, columns, class_dtype), ours_in)
    _compare(opts, expected, got)


def _compare(opts: dict[str, Any], expected: list, got: list) -> None:
    assert [g.shape for g in got] == [e.shape for e in expected]
    assert all(g.dtype == np.float32 for g in got)
    count = int(expected[3][0])
    assert int(got[3][0]) == count
    rows = written_rows(opts, count)
    np.testing.assert_allclose(got[0][0, rows], expected[0][0, rows], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1][0, rows], expected[1][0, rows])
    np.testing.assert_allclose(got[2][0, rows], expected[2][0, rows], rtol=1e-5, atol=1e-5)
    unused = np.setdiff1d(np.arange(got[1].shape[1]), rows)
    assert not got[0][0, unused].any() and not got[1][0, unused].any()
    assert not got[2][0, unused].any()


def test_quantized_box_encodings_and_anchors() -> None:
    opts = options({"max_classes_per_detection": 2})
    n = 24
    rng = np.random.default_rng(3)
    xs = [
        rng.integers(90, 166, (1, n, 4)).astype(np.uint8),
        rng.uniform(0, 1, (1, n, 4)).astype(np.float32),
    ]
    model = build(opts, n, 4, "float32", box_dtype="uint8")
    _compare(opts, run_litert(model, xs), run_ours(model, xs))


def test_hand_made_case() -> None:
    """Two overlapping anchors on one object and one elsewhere: NMS keeps two, best first."""
    opts = options({"max_detections": 3, "num_classes": 2})
    a = np.array([[0.3, 0.3, 0.2, 0.2], [0.31, 0.3, 0.2, 0.2], [0.7, 0.7, 0.2, 0.2]], np.float32)
    scores = np.array([[[0.0, 0.9, 0.1], [0.0, 0.8, 0.1], [0.0, 0.1, 0.7]]], np.float32)
    model = build(opts, 3, 3, "float32", anchor_values=a)
    got = run_ours(model, [np.zeros((1, 3, 4), np.float32), scores])
    assert got[3].tolist() == [2.0]
    assert got[1][0].tolist() == [0.0, 1.0, 0.0] and got[2][0].tolist() == [
        np.float32(0.9),
        np.float32(0.7),
        0.0,
    ]
    np.testing.assert_allclose(got[0][0, 1], [0.6, 0.6, 0.8, 0.8], atol=1e-6)
    _compare(opts, run_litert(model, [np.zeros((1, 3, 4), np.float32), scores]), got)


CHOSEN = [
    ([3.0, 1.0, 2.0], 2, [0, 2]),
    ([1.0, 5.0, 5.0, 2.0], 1, [1]),  # argmax: the first maximum
    ([2.0, 2.0, 2.0, 1.0, 2.0], 5, None),
]


@pytest.mark.parametrize("values,k,expected", CHOSEN, ids=["distinct", "argmax", "ties"])
def test_partial_argsort(values: list, k: int, expected: list | None) -> None:
    got = partial_argsort(values, k)
    assert len(got) == min(k, len(values)) and sorted(set(got)) == sorted(got)
    assert [values[i] for i in got] == sorted(values, reverse=True)[:k]
    if expected is not None:
        assert got == expected


def test_options_need_a_flexbuffer() -> None:
    with pytest.raises(ModelError, match="custom options"):
        parse_options(None)
    with pytest.raises(ModelError, match="flexbuffer"):
        parse_options(b"\x01")


BAD_OPTIONS = {
    "iou_threshold_over_one": ({"nms_iou_threshold": 1.5}, "IoU threshold"),
    "huge_max_detections": ({"max_detections": 1 << 30}, "output rows"),
    "no_classes": ({"num_classes": 0}, "class scores per anchor"),
    "regular_without_detections_per_class": (
        {"use_regular_nms": True, "detections_per_class": 0},
        "detections_per_class",
    ),
}


@pytest.mark.parametrize("case", BAD_OPTIONS, ids=BAD_OPTIONS.keys())
def test_bad_options_are_model_errors(case: str) -> None:
    overrides, message = BAD_OPTIONS[case]
    model = build(options(overrides), 8, 4, "float32", declared_rows=5)
    with pytest.raises(ModelError, match=message):
        run_ours(model, inputs(8, 4, "float32", 0))


def test_reader_keeps_custom_options() -> None:
    opts = options({})
    op = read_model(build(opts, 8, 4, "float32")).main.operators[0]
    assert op.op == "CUSTOM:TFLite_Detection_PostProcess" and op.code == 32
    assert flexbuffers.Loads(op.options["custom_options"]) == opts
