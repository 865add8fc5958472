"""The synthetic SSD-style detector: valid in LiteRT, equal to our interpreter on generated
images, and its scores are the anchors' IoU with the rectangles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from delegate_runtime import litert, read_model
from delegate_runtime.interpreter import Interpreter
from delegate_runtime.tools.accuracy import synthetic
from delegate_runtime.tools.accuracy.preprocess import Preprocess, prepare
from delegate_runtime.tools.accuracy.synthetic_detector import (
    anchor_shapes,
    anchor_sizes,
    mask_weights,
)
from tests.conftest import require


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ssd")
    return synthetic.make_detection(root, num_images=3, width=96, height=64, seed=2)


def _image(dataset: dict[str, str], i: int) -> tuple[np.ndarray, dict]:
    model = read_model(Path(dataset["model"]).read_bytes())
    coco = json.loads(Path(dataset["annotations"]).read_text())
    t_in = model.main.tensors[model.main.inputs[0]]
    name = coco["images"][i]["file_name"]
    x = prepare(Path(dataset["images"]) / name, t_in, Preprocess(crop_fraction=1.0))
    return x, coco


def test_anchor_sizes_are_even_and_span_the_range() -> None:
    sizes = anchor_sizes(12, 46)
    assert sizes[0] == 12 and sizes[-1] == 46 and all(s % 2 == 0 for s in sizes)
    shapes = anchor_shapes(128, 96)
    assert all((96 - s.h) // s.stride + 1 == s.rows for s in shapes)


def test_masks_are_one_on_their_colour_and_zero_elsewhere() -> None:
    colours = [c for _, _, c in synthetic.SHAPES]
    filters, bias = mask_weights(colours)
    pixels = np.array(colours + [(30, 30, 30), (55, 55, 55)], np.float32)
    x = (pixels - 127.5) / 127.5
    masks = np.maximum(x @ filters.reshape(len(colours), 3).T + bias, 0)
    np.testing.assert_allclose(masks[:3], np.eye(3), atol=1e-5)
    assert not masks[3:].any()


@pytest.mark.parametrize("i", range(3))
def test_matches_litert_on_generated_images(dataset: dict[str, str], i: int) -> None:
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    data = Path(dataset["model"]).read_bytes()
    x, _ = _image(dataset, i)
    # NOTE: neighbouring anchors can tie in exact arithmetic, so the last bit of the pooled
    # means picks the box; LiteRT's builtin kernels round as ours do, XNNPACK does not.
    expected = litert.run(data, [x], xnnpack=False)
    got = Interpreter(read_model(data)).invoke([x])
    count = int(expected[3][0])
    assert int(got[3][0]) == count > 0
    np.testing.assert_allclose(got[0][0, :count], expected[0][0, :count], atol=1e-5)
    np.testing.assert_array_equal(got[1][0, :count], expected[1][0, :count])
    np.testing.assert_allclose(got[2][0, :count], expected[2][0, :count], atol=1e-5)


def test_best_detection_is_an_annotated_rectangle(dataset: dict[str, str]) -> None:
    x, coco = _image(dataset, 0)
    boxes, classes, scores, _ = Interpreter(read_model(Path(dataset["model"]).read_bytes())).invoke(
        [x]
    )
    ymin, xmin, ymax, xmax = boxes[0, 0] * [64, 96, 64, 96]
    truth = [a for a in coco["annotations"] if a["image_id"] == 1]
    ious = []
    for a in truth:
        ax, ay, aw, ah = a["bbox"]
        iw = max(0.0, min(xmax, ax + aw) - max(xmin, ax))
        ih = max(0.0, min(ymax, ay + ah) - max(ymin, ay))
        inter = iw * ih
        ious.append(inter / ((xmax - xmin) * (ymax - ymin) + aw * ah - inter))
    best = int(np.argmax(ious))
    assert ious[best] > 0.5 and scores[0, 0] > 0.5
    assert truth[best]["category_id"] == int(classes[0, 0]) + 1
