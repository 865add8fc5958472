"""NON_MAX_SUPPRESSION_V4 and V5 against LiteRT's reference kernels."""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.errors import ModelError
from tests.ops.conftest import assert_matches_litert, run_ours
from tests.ops.oneop import Const, In, one_op

RNG = np.random.default_rng(43)


def clustered_boxes(n: int, clusters: int = 3) -> np.ndarray:
    """Boxes [y1, x1, y2, x2] jittered around a few centres, so that many overlap."""
    centres = RNG.uniform(0.2, 0.8, (clusters, 2))
    c = centres[RNG.integers(0, clusters, n)] + RNG.normal(0, 0.03, (n, 2))
    size = RNG.uniform(0.1, 0.3, (n, 2))
    return np.concatenate([c - size / 2, c + size / 2], axis=1).astype(np.float32)


def scores_of(n: int, kind: str) -> np.ndarray:
    if kind == "ties":  # few distinct values: the heap's order among equal scores shows
        return RNG.choice(np.array([0.3, 0.6, 0.9], np.float32), n)
    return RNG.uniform(0, 1, n).astype(np.float32)


def build(version, boxes, scores, max_out, iou, score_threshold, sigma=None, runtime_max=False):
    args = [
        In(boxes),
        In(scores),
        In(np.array(max_out, np.int32)) if runtime_max else Const(max_out),
        Const(iou, np.float32),
        Const(score_threshold, np.float32),
    ]
    outs = [((max_out,), np.int32)]
    if version == 5:
        args.append(Const(sigma, np.float32))
        outs.append(((max_out,), np.float32))
    outs.append(((), np.int32))
    return one_op(f"NON_MAX_SUPPRESSION_V{version}", args, outs)


V4_CASES = {
    "clusters_iou_half": (12, "uniform", 6, 0.5, 0.0),
    "clusters_strict_iou": (12, "uniform", 12, 0.1, 0.0),
    "padding_past_valid": (8, "uniform", 10, 0.3, 0.0),
    "score_threshold_filters": (10, "uniform", 10, 0.6, 0.5),
    "max_output_limits": (15, "uniform", 3, 0.7, 0.0),
    "equal_scores_heap_order": (16, "ties", 10, 0.5, 0.0),
    "equal_scores_no_overlap_limit": (16, "ties", 16, 1.0, 0.0),
}


@pytest.mark.parametrize("case", V4_CASES, ids=V4_CASES.keys())
def test_non_max_suppression_v4(case):
    n, kind, max_out, iou, threshold = V4_CASES[case]
    model, feeds = build(4, clustered_boxes(n), scores_of(n, kind), max_out, iou, threshold)
    assert_matches_litert(model, feeds)


def test_non_max_suppression_v4_flipped_corners():
    """Corners in either order: box 1 is box 0 flipped, so they overlap fully."""
    boxes = np.array(
        [[0, 0, 1, 1], [1, 1, 0, 0], [0.1, 0.1, 0.9, 0.9], [2, 2, 3, 3], [3, 2, 2, 3]], np.float32
    )
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.65], np.float32)
    model, feeds = build(4, boxes, scores, 5, 0.5, 0.0)
    got = assert_matches_litert(model, feeds)
    assert got[0].tolist() == [0, 4, 0, 0, 0] and got[1] == 2


def test_non_max_suppression_v4_zero_area_box_is_selected_repeatedly():
    """TFLite pushes a selected candidate back into its queue; a box suppresses itself
    through its IoU of 1 with itself, but a zero-area box has IoU 0 with everything, so
    LiteRT selects it again and again. We do the same."""
    boxes = np.array([[0, 0, 1, 1], [0.5, 0.5, 0.5, 0.9], [2, 2, 3, 3]], np.float32)
    scores = np.array([0.9, 0.95, 0.6], np.float32)
    model, feeds = build(4, boxes, scores, 3, 0.5, 0.0)
    got = assert_matches_litert(model, feeds)
    assert got[0].tolist() == [1, 1, 1] and got[1] == 3


def test_non_max_suppression_v4_runtime_max_output_size():
    """max_output_size is an input: the output length exists only at run time."""
    model, feeds = build(
        4, clustered_boxes(9), scores_of(9, "uniform"), 7, 0.5, 0.0, runtime_max=True
    )
    got = assert_matches_litert(model, feeds)
    assert got[0].shape == (7,)


V5_CASES = {
    "hard_nms_sigma0": (12, "uniform", 6, 0.5, 0.0, 0.0),
    "soft_sigma_half": (12, "uniform", 8, 1.0, 0.0, 0.5),
    "soft_with_score_threshold": (14, "uniform", 10, 1.0, 0.3, 0.2),
    "soft_and_hard": (14, "uniform", 10, 0.6, 0.1, 0.4),
    "soft_equal_scores": (16, "ties", 12, 0.8, 0.2, 0.3),
}


@pytest.mark.parametrize("case", V5_CASES, ids=V5_CASES.keys())
def test_non_max_suppression_v5(case):
    n, kind, max_out, iou, threshold, sigma = V5_CASES[case]
    model, feeds = build(5, clustered_boxes(n), scores_of(n, kind), max_out, iou, threshold, sigma)
    assert_matches_litert(model, feeds)


def test_non_max_suppression_v4_negative_max_output_is_a_model_error():
    model, feeds = build(
        4, clustered_boxes(4), scores_of(4, "uniform"), 2, 0.5, 0.0, runtime_max=True
    )
    feeds[2] = np.array(-1, np.int32)
    with pytest.raises(ModelError, match=r"NON_MAX_SUPPRESSION_V4.*max_output_size -1 is negative"):
        run_ours(model, feeds)


def test_non_max_suppression_v5_negative_sigma_is_a_model_error():
    model, feeds = build(5, clustered_boxes(4), scores_of(4, "uniform"), 2, 0.5, 0.0, sigma=-0.5)
    with pytest.raises(
        ModelError, match=r"NON_MAX_SUPPRESSION_V5.*soft_nms_sigma -0.5 is negative"
    ):
        run_ours(model, feeds)
