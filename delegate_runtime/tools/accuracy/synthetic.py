"""Small labelled synthetic datasets, for tests and demos (no dataset can be downloaded).

- Classification (ILSVRC-style): `images/` of noisy solid-colour PNGs with a distractor
  rectangle, `ground_truth_labels.txt` (one label per image, sorted file order),
  `model_output_labels.txt`, and optionally `classifier.tflite`: a nearest-colour
  classifier (AVERAGE_POOL_2D over the image, RESHAPE, FULLY_CONNECTED, SOFTMAX) that
  takes (pixel - 127.5) / 127.5 inputs; large distractors fool it now and then.
- Detection (COCO): `images/` with coloured rectangles on a noisy dark background,
  `annotations.json` (images, annotations with exact bboxes and areas, categories), and
  optionally `detector.tflite`: an SSD-style detector of the rectangles ending with
  TFLite_Detection_PostProcess (see `synthetic_detector`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import JobError

#: (label, RGB) of the classification classes, in model output order.
COLOURS: list[tuple[str, tuple[int, int, int]]] = [
    ("red", (220, 40, 40)),
    ("green", (40, 200, 60)),
    ("blue", (40, 60, 220)),
    ("yellow", (230, 220, 50)),
    ("magenta", (210, 50, 200)),
    ("cyan", (50, 210, 210)),
    ("white", (235, 235, 235)),
    ("grey", (120, 120, 120)),
    ("orange", (240, 140, 30)),
    ("purple", (110, 40, 160)),
    ("brown", (120, 70, 30)),
    ("black", (15, 15, 15)),
]
#: The smallest image side of each dataset, pixels.
MIN_CLASSIFICATION_SIZE = 8
MIN_DETECTION_SIDE = 16
#: COCO categories of the detection dataset: id, name, colour.
SHAPES: list[tuple[int, str, tuple[int, int, int]]] = [
    (1, "red_box", (230, 40, 40)),
    (2, "green_box", (40, 220, 60)),
    (3, "blue_box", (50, 70, 240)),
]


def _save(pixels: np.ndarray, path: Path) -> None:
    from PIL import Image

    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB").save(path)


def _prepare(out_dir: str | Path) -> Path:
    root = Path(out_dir)
    try:
        (root / "images").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobError(f"cannot create {root}: {exc.strerror or exc}") from exc
    return root


def make_classification(
    out_dir: str | Path,
    num_classes: int = 4,
    images_per_class: int = 5,
    size: int = 64,
    noise: float = 60.0,
    seed: int = 0,
    with_model: bool = True,
) -> dict[str, str]:
    """Write an ILSVRC-style dataset; returns the paths (images, labels, model)."""
    if not 2 <= num_classes <= len(COLOURS):
        raise JobError(f"num_classes must be in [2, {len(COLOURS)}], got {num_classes}")
    if images_per_class < 1 or size < MIN_CLASSIFICATION_SIZE:
        raise JobError(
            f"need at least 1 image per class and a size of at least {MIN_CLASSIFICATION_SIZE}"
        )
    if noise < 0:
        raise JobError(f"noise is a standard deviation: 0 or more, got {noise}")
    root = _prepare(out_dir)
    rng = np.random.default_rng(seed)
    classes = COLOURS[:num_classes]
    order = rng.permutation(np.repeat(np.arange(num_classes), images_per_class))
    truth = []
    for i, c in enumerate(order):
        pixels = np.empty((size, size, 3))
        pixels[:] = classes[c][1]
        pixels += rng.normal(0, noise, pixels.shape)
        h, w = rng.integers(size // 8, size * 4 // 5, 2)
        y, x = rng.integers(0, size - h), rng.integers(0, size - w)
        pixels[y : y + h, x : x + w] = rng.integers(0, 256, 3)
        _save(pixels, root / "images" / f"img_{i:05d}.png")
        truth.append(classes[c][0])
    paths = {
        "images": str(root / "images"),
        "ground_truth_labels": str(root / "ground_truth_labels.txt"),
        "model_output_labels": str(root / "model_output_labels.txt"),
    }
    Path(paths["ground_truth_labels"]).write_text("\n".join(truth) + "\n")
    Path(paths["model_output_labels"]).write_text("\n".join(n for n, _ in classes) + "\n")
    if with_model:
        paths["model"] = str(root / "classifier.tflite")
        Path(paths["model"]).write_bytes(colour_classifier([rgb for _, rgb in classes], size))
    return paths


def colour_classifier(
    colours: list[tuple[int, int, int]], size: int, sharpness: float = 4.0
) -> bytes:
    """A .tflite nearest-colour classifier for [1, size, size, 3] inputs in [-1, 1]."""
    from ...builder import ModelBuilder

    protos = np.array(colours, np.float32) / 127.5 - 1.0  # colours as normalised inputs
    weights = (sharpness * protos).astype(np.float32)
    bias = (-0.5 * sharpness * (protos**2).sum(axis=1)).astype(np.float32)
    b = ModelBuilder(description="devicefarm synthetic colour classifier")
    g = b.main
    x = g.input("image", (1, size, size, 3), np.float32)
    pooled = g.tensor("mean_colour", (1, 1, 1, 3), np.float32)
    g.op(
        "AVERAGE_POOL_2D",
        [x],
        [pooled],
        padding="VALID",
        stride_w=size,
        stride_h=size,
        filter_width=size,
        filter_height=size,
    )
    flat = g.tensor("flat", (1, 3), np.float32)
    g.op(
        "RESHAPE", [pooled, g.const("shape", np.array([1, 3], np.int32))], [flat], new_shape=[1, 3]
    )
    logits = g.tensor("logits", (1, len(colours)), np.float32)
    g.op("FULLY_CONNECTED", [flat, g.const("w", weights), g.const("b", bias)], [logits])
    probs = g.tensor("probabilities", (1, len(colours)), np.float32)
    g.op("SOFTMAX", [logits], [probs], beta=1.0)
    g.output(probs)
    return b.build()


def make_detection(
    out_dir: str | Path,
    num_images: int = 8,
    width: int = 128,
    height: int = 96,
    max_objects: int = 3,
    seed: int = 0,
    with_model: bool = True,
) -> dict[str, str]:
    """Write a COCO-style detection dataset; returns the paths (images, annotations, model)."""
    if num_images < 1 or max_objects < 1 or min(width, height) < MIN_DETECTION_SIDE:
        side = MIN_DETECTION_SIDE
        raise JobError(f"need at least 1 image, 1 object per image and {side}x{side} pixels")
    root = _prepare(out_dir)
    rng = np.random.default_rng(seed)
    images: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    for i in range(num_images):
        pixels = rng.normal(30, 12, (height, width, 3))
        name = f"det_{i:05d}.png"
        for _ in range(int(rng.integers(1, max_objects + 1))):
            cat, _, colour = SHAPES[int(rng.integers(len(SHAPES)))]
            w = int(rng.integers(width // 8, width // 2))
            h = int(rng.integers(height // 8, height // 2))
            x, y = int(rng.integers(0, width - w)), int(rng.integers(0, height - h))
            pixels[y : y + h, x : x + w] = colour
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": cat,
                    "bbox": [x, y, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
        _save(pixels, root / "images" / name)
        images.append({"id": i + 1, "file_name": name, "width": width, "height": height})
    coco = {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": c, "name": n, "supercategory": "shape"} for c, n, _ in SHAPES],
    }
    ann_path = root / "annotations.json"
    ann_path.write_text(json.dumps(coco, indent=1))
    paths = {"images": str(root / "images"), "annotations": str(ann_path)}
    if with_model:
        from .synthetic_detector import ssd_detector

        paths["model"] = str(root / "detector.tflite")
        Path(paths["model"]).write_bytes(ssd_detector([c for _, _, c in SHAPES], width, height))
    return paths
