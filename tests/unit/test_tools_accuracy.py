"""Task accuracy: preprocessing, top-K on a generated ILSVRC-style folder, COCO mAP against
pycocotools on the same detections, SSD output decoding, the side-by-side delta."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from delegate_runtime.errors import JobError, ModelError
from delegate_runtime.graph import Quantization, Tensor
from delegate_runtime.reader import load_model, read_model
from delegate_runtime.session import make_session
from delegate_runtime.tools.accuracy import synthetic
from delegate_runtime.tools.accuracy.coco import evaluate_detections, load_coco
from delegate_runtime.tools.accuracy.compare import delta, format_side_by_side
from delegate_runtime.tools.accuracy.detection import Decoding, decode, identify_outputs
from delegate_runtime.tools.accuracy.evaluate import run_accuracy
from delegate_runtime.tools.accuracy.imagenet import (
    ClassificationMetrics,
    evaluate_classification,
    load_dataset,
)
from delegate_runtime.tools.accuracy.preprocess import Preprocess, crop_and_resize, to_input
from delegate_runtime.tools.benchmark import BenchmarkOptions
from tests.conftest import require


@pytest.fixture(scope="module")
def cls_data(tmp_path_factory):
    return synthetic.make_classification(
        tmp_path_factory.mktemp("cls"), num_classes=4, images_per_class=3, size=16, noise=90
    )


@pytest.fixture(scope="module")
def det_data(tmp_path_factory):
    return synthetic.make_detection(tmp_path_factory.mktemp("det"), num_images=6, seed=1)


# -- preprocessing ------------------------------------------------------------------------


def _tensor(dtype, quant=None):
    return Tensor(0, "image", (1, 4, 4, 3), np.dtype(dtype), quantization=quant)


def test_central_crop_then_resize():
    pixels = np.zeros((8, 8, 1), np.uint8)
    pixels[2:6, 2:6] = 200  # the central half
    out = crop_and_resize(pixels, 2, 2, 0.5)
    np.testing.assert_allclose(out, 200.0)


@pytest.mark.parametrize(
    "dtype, mode, quant, pixel, expected",
    [
        (np.float32, "quantize", None, 255.0, 1.0),
        (np.uint8, "raw", None, 200.0, 200),
        (np.int8, "raw", None, 200.0, 72),
        (
            np.int8,
            "quantize",
            Quantization(np.array([1 / 128], np.float32), np.array([0])),
            191.25,
            64,
        ),
        (
            np.uint8,
            "quantize",
            Quantization(np.array([1 / 127.5], np.float32), np.array([128])),
            63.75,
            64,
        ),
    ],
    ids=["float_normalised", "uint8_raw", "int8_raw", "int8_quantized", "uint8_quantized"],
)
def test_input_dtypes(dtype, mode, quant, pixel, expected):
    x = to_input(
        np.full((4, 4, 3), pixel, np.float32),
        _tensor(dtype, quant),
        Preprocess(quantized_input=mode),
    )
    assert x.dtype == dtype and x.shape == (1, 4, 4, 3)
    assert x.flat[0] == pytest.approx(expected, abs=1e-6)


def test_bad_preprocess_is_a_job_error():
    with pytest.raises(JobError):
        Preprocess(crop_fraction=0).validate()


# -- top-K ------------------------------------------------------------------------------------------


def test_topk_counts_rank_of_the_truth():
    m = ClassificationMetrics()
    m.add(np.array([0.1, 0.5, 0.4]), 1)  # rank 0
    m.add(np.array([0.1, 0.5, 0.4]), 2)  # rank 1
    m.add(np.array([0.6, 0.3, 0.1]), 2)  # rank 2
    assert m.topk[:4] == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert "Top-1 Accuracy: 0.333333" in m.format()


def test_generated_classification_dataset_loads_in_order(cls_data):
    data = load_dataset(
        cls_data["images"], cls_data["ground_truth_labels"], cls_data["model_output_labels"]
    )
    assert len(data.images) == 12 and [p.name for p in data.images] == sorted(
        p.name for p in data.images
    )
    assert data.model_labels == ["red", "green", "blue", "yellow"]
    assert sorted(data.labels) == sorted(["red", "green", "blue", "yellow"] * 3)


def test_classifier_scores_the_generated_images(cls_data):
    model = load_model(cls_data["model"])
    data = load_dataset(
        cls_data["images"], cls_data["ground_truth_labels"], cls_data["model_output_labels"]
    )
    m = evaluate_classification(make_session(model), model, data, Preprocess())
    assert m.num_images == 12
    assert m.topk[0] >= 0.5  # far better than chance (0.25)
    assert m.topk[3] == 1.0  # 4 classes: the truth is always in the top 4
    assert all(a <= b for a, b in itertools.pairwise(m.topk))


@pytest.mark.parametrize(
    "change, message",
    [
        ("drop_label", "ground-truth labels"),
        ("unknown_label", "not among the model's labels"),
    ],
)
def test_bad_label_files_are_job_errors(cls_data, tmp_path, change, message):
    lines = Path(cls_data["ground_truth_labels"]).read_text().split()
    lines = lines[:-1] if change == "drop_label" else ["zebra"] + lines[1:]
    gt = tmp_path / "gt.txt"
    gt.write_text("\n".join(lines))
    with pytest.raises(JobError, match=message):
        load_dataset(cls_data["images"], gt, cls_data["model_output_labels"])


def test_label_count_must_match_the_model(cls_data, tmp_path):
    labels = tmp_path / "labels.txt"
    labels.write_text("red\ngreen\nblue\nyellow\nextra\n")
    model = load_model(cls_data["model"])
    data = load_dataset(cls_data["images"], cls_data["ground_truth_labels"], labels)
    with pytest.raises(JobError, match="gives 4 scores"):
        evaluate_classification(make_session(model), model, data, Preprocess())


# -- COCO mAP against pycocotools ------------------------------------------------------------------


def _noisy_detections(annotations_path, seed, misses=0.2, extra=3, crowd=False):
    """Ground truth jittered, some dropped, some false positives, random scores."""
    rng = np.random.default_rng(seed)
    coco = json.loads(Path(annotations_path).read_text())
    dets = []
    for a in coco["annotations"]:
        if rng.random() < misses:
            continue
        x, y, w, h = a["bbox"]
        j = rng.normal(0, 0.12 * min(w, h), 4)
        cat = a["category_id"] if rng.random() > 0.1 else 1 + (a["category_id"] % 3)
        dets.append(
            {
                "image_id": a["image_id"],
                "category_id": cat,
                "bbox": [x + j[0], y + j[1], max(1.0, w + j[2]), max(1.0, h + j[3])],
                "score": float(rng.random()),
            }
        )
    for img in coco["images"]:
        for _ in range(int(rng.integers(0, extra + 1))):
            dets.append(
                {
                    "image_id": img["id"],
                    "category_id": int(rng.integers(1, 4)),
                    "bbox": [float(v) for v in rng.uniform(0, 60, 4) + [0, 0, 5, 5]],
                    "score": float(rng.random()),
                }
            )
    return dets


def _pycocotools_stats(annotations_path, dets):
    require(importlib.util.find_spec("pycocotools") is not None, "pycocotools (the mAP oracle)")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(annotations_path))
        dt = gt.loadRes(dets)
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_map_matches_pycocotools(det_data, seed):
    dets = _noisy_detections(det_data["annotations"], seed)
    ours = evaluate_detections(load_coco(det_data["annotations"]), dets)
    ref = _pycocotools_stats(det_data["annotations"], dets)
    assert ours.map == pytest.approx(ref[0], abs=1e-9)
    assert ours.map50 == pytest.approx(ref[1], abs=1e-9)
    assert ours.map75 == pytest.approx(ref[2], abs=1e-9)


def test_map_with_crowd_annotations_matches_pycocotools(det_data, tmp_path):
    coco = json.loads(Path(det_data["annotations"]).read_text())
    coco["annotations"][0]["iscrowd"] = 1
    coco["annotations"][3]["iscrowd"] = 1
    path = tmp_path / "crowd.json"
    path.write_text(json.dumps(coco))
    dets = _noisy_detections(path, 7)
    ours = evaluate_detections(load_coco(path, det_data["images"]), dets)
    ref = _pycocotools_stats(path, dets)
    assert (ours.map, ours.map50) == pytest.approx((ref[0], ref[1]), abs=1e-9)


def test_perfect_detections_score_one(det_data):
    coco = json.loads(Path(det_data["annotations"]).read_text())
    dets = [
        dict(image_id=a["image_id"], category_id=a["category_id"], bbox=a["bbox"], score=1.0)
        for a in coco["annotations"]
    ]
    m = evaluate_detections(load_coco(det_data["annotations"]), dets)
    assert m.map == pytest.approx(1.0) and m.map50 == pytest.approx(1.0)
    assert "Overall mAP: 1" in m.format()
    assert "Average Precision [IOU Threshold=0.5]: 1" in m.format()


def test_bad_annotation_file_is_a_job_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": []}')
    with pytest.raises(JobError):
        load_coco(bad)


# -- SSD decoding ------------------------------------------------------------------------------------


def test_decode_ssd_outputs():
    outs = [
        np.array([[[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.2, 0.5]]]),  # ymin xmin ymax xmax
        np.array([[1.0, 0.0]]),
        np.array([[0.9, 0.3]]),
        np.array([2.0]),
    ]
    roles = {"boxes": 0, "classes": 1, "scores": 2, "count": 3}
    image = {"id": 7, "width": 200, "height": 100}
    dets = decode(outs, roles, image, [10, 20], Decoding())
    assert dets[0] == {
        "image_id": 7,
        "category_id": 20,
        "bbox": pytest.approx([40.0, 10.0, 80.0, 40.0]),
        "score": 0.9,
    }
    assert dets[1]["bbox"] == pytest.approx([0.0, 0.0, 100.0, 100.0])  # clipped to the image
    # offset 1: row 0 (class 1) maps past the label map and is dropped; row 1 becomes 20
    shifted = decode(outs, roles, image, [10, 20], Decoding(class_offset=1))
    assert [d["category_id"] for d in shifted] == [20]
    assert len(decode(outs, roles, image, [10, 20], Decoding(score_threshold=0.5))) == 1


@pytest.mark.parametrize(
    "names, order",
    [
        (
            ("boxes", "classes", "scores", "count"),
            {"boxes": 0, "classes": 1, "scores": 2, "count": 3},
        ),
        (
            ("scores", "boxes", "num_detections", "classes"),
            {"scores": 0, "boxes": 1, "count": 2, "classes": 3},
        ),
        (("a", "b", "c", "d"), {"boxes": 0, "classes": 1, "scores": 2, "count": 3}),
    ],
    ids=["tflite_names", "tf2_names_reordered", "by_shape"],
)
def test_identify_outputs(names, order):
    class M:  # only the graph's main subgraph is read
        pass

    shapes = {"boxes": (1, 2, 4), "classes": (1, 2), "scores": (1, 2), "count": (1,)}
    roles_by_name = {
        "boxes": "boxes",
        "classes": "classes",
        "scores": "scores",
        "count": "count",
        "num_detections": "count",
        "a": "boxes",
        "b": "classes",
        "c": "scores",
        "d": "count",
    }
    tensors = [
        Tensor(i, n, shapes[roles_by_name[n]], np.dtype(np.float32)) for i, n in enumerate(names)
    ]
    from delegate_runtime.graph import Model, Subgraph

    m = Model([Subgraph("main", tensors, [], (), tuple(range(4)))], [])
    assert identify_outputs(m) == order


def test_identify_outputs_needs_four():
    from delegate_runtime.graph import Model, Subgraph

    t = Tensor(0, "probs", (1, 10), np.dtype(np.float32))
    with pytest.raises(ModelError, match="4 outputs"):
        identify_outputs(Model([Subgraph("main", [t], [], (), (0,))], []))


# -- side by side ---------------------------------------------------------------------------------------


def test_delta_and_table():
    ref, test = {"top1": 0.75, "top5": 1.0}, {"top1": 0.7, "top5": 1.0}
    assert delta(ref, test) == pytest.approx({"top1": -0.05, "top5": 0.0})
    table = format_side_by_side(ref, test, "cpu", "gpu")
    assert table.splitlines()[2].split() == ["top1", "0.75", "0.7", "-0.05"]


def test_run_accuracy_compares_reference_and_delegate(cls_data, monkeypatch):
    """A stand-in delegate that swaps two classes shows up as a negative delta."""
    from delegate_runtime.tools.accuracy import evaluate as ev

    real = ev._session

    class Swapped:
        def __init__(self, inner):
            self.inner = inner

        def invoke(self, inputs):
            out = self.inner.invoke(inputs)[0].copy()
            out[:, [0, 1]] = out[:, [1, 0]]
            return [out]

    def fake_session(model, delegate, options, log):
        s = real(model, "cpu", options, log)
        return Swapped(s) if delegate == "gpu" else s

    monkeypatch.setattr(ev, "_session", fake_session)
    data = load_dataset(
        cls_data["images"], cls_data["ground_truth_labels"], cls_data["model_output_labels"]
    )
    r = run_accuracy("classification", cls_data["model"], data, BenchmarkOptions(use_gpu=True))
    assert r.reference.startswith("delegate_runtime cpu") and r.test.startswith(
        "delegate_runtime gpu"
    )
    assert r.delta["top1"] < 0
    assert "== reference: delegate_runtime cpu (fp32) ==" in r.log and "Accuracy delta" in r.log
    json.dumps(r.to_dict())


def test_read_model_of_generated_classifier(cls_data):
    m = read_model(Path(cls_data["model"]).read_bytes())
    assert [op.op for op in m.main.operators] == [
        "AVERAGE_POOL_2D",
        "RESHAPE",
        "FULLY_CONNECTED",
        "SOFTMAX",
    ]
