#!/usr/bin/env python3
"""Build the Keras part of the real-model zoo: keras.applications architectures at batch 1,
random weights with calibrated BatchNorm statistics, converted by the official converter.

    python scripts/make_keras_zoo.py [--out DIR] [--only NAME ...] [--force]

writes DIR/NAME__fp32.tflite (and __fp16, __int8 where listed) and DIR/manifest.json (per
model: input range, output spread, converter version, and the recipe: this script's hash, so
that a file built by an older recipe is stale and rebuilt, never trusted). DIR defaults to
~/.cache/devicefarm/zoo/keras. Needs TensorFlow and ai-edge-litert, which loads every
written file as a check (`pip install -e '.[zoo,reference]'`; TensorFlow's CPU build is
enough).

Random weights lose their signal through depth: each BatchNorm's moving statistics are set
from the batch statistics of calibration images (one pass in training mode with momentum
0), so activations stay normalised and the classifier's softmax is not uniform. A model
whose outputs do not vary with the input is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path.home() / ".cache" / "devicefarm" / "zoo" / "keras"
IMAGE_SIZE = 224
CALIBRATION_IMAGES = 16  #: images in the BatchNorm calibration batch
REPRESENTATIVE_IMAGES = 16  #: images the int8 converter calibrates ranges on
SEED = 13
LOGIT_STD = 3.0  #: spread of the classifier's logits per image after calibration
#: Minimum spread of an output across different inputs, as a fraction of its range.
MIN_OUTPUT_SPREAD = 1e-3


@dataclass(frozen=True)
class ZooModel:
    name: str  #: keras.applications constructor
    input_range: tuple[float, float]  #: pixel range the architecture expects
    variants: tuple[str, ...] = ("fp32",)
    options: tuple[tuple[str, object], ...] = ()  #: extra constructor arguments


# Models with built-in preprocessing take pixels in [0, 255]; the others take [-1, 1]
# (their preprocess_input runs outside the model).
ZOO = [
    ZooModel("MobileNetV2", (-1.0, 1.0), ("fp32", "fp16", "int8")),
    ZooModel(
        "MobileNetV3Small",
        (0.0, 255.0),
        ("fp32", "fp16", "int8"),
        (("include_preprocessing", True),),
    ),
    ZooModel("MobileNetV3Large", (0.0, 255.0), ("fp32",), (("include_preprocessing", True),)),
    ZooModel("EfficientNetB0", (0.0, 255.0), ("fp32", "fp16", "int8")),
    ZooModel("EfficientNetV2B0", (0.0, 255.0), ("fp32", "fp16", "int8")),
    ZooModel("DenseNet121", (-1.0, 1.0), ("fp32", "int8")),
    ZooModel("NASNetMobile", (-1.0, 1.0), ("fp32",)),
    ZooModel("ResNet50V2", (-1.0, 1.0), ("fp32", "fp16")),
]


def random_images(rng: np.random.Generator, count: int, lo: float, hi: float) -> np.ndarray:
    """Smooth random images (coarse blobs plus fine noise) scaled to [lo, hi], NHWC float32."""
    coarse = rng.random((count, 7, 7, 3))
    coarse = coarse.repeat(IMAGE_SIZE // 7, axis=1).repeat(IMAGE_SIZE // 7, axis=2)
    fine = rng.random((count, IMAGE_SIZE, IMAGE_SIZE, 3))
    unit = np.clip(0.75 * coarse + 0.25 * fine, 0.0, 1.0)
    return (lo + (hi - lo) * unit).astype(np.float32)


def build(spec: ZooModel):
    """The architecture with random weights and BatchNorm statistics calibrated on images."""
    import keras

    keras.utils.set_random_seed(SEED)
    ctor = getattr(keras.applications, spec.name)
    model = ctor(weights=None, input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3), **dict(spec.options))
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in norms:
        layer.momentum = 0.0  # the moving statistics become this batch's statistics
    rng = np.random.default_rng(SEED)
    images = random_images(rng, CALIBRATION_IMAGES, *spec.input_range)
    model(images, training=True)
    scale_classifier(model, images)
    return model, len(norms)


def scale_classifier(model, images: np.ndarray) -> None:
    """Scale the last weighted layer so that its logits spread by LOGIT_STD per image: a
    random head over normalised features gives a near-uniform softmax, which an int8
    output (steps of 1/256) would flatten to a few values."""
    import keras

    head = [layer for layer in model.layers if getattr(layer, "kernel", None) is not None][-1]
    activation, head.activation = head.activation, keras.activations.linear
    logits = np.asarray(keras.Model(model.input, head.output)(images, training=False))
    head.activation = activation
    factor = LOGIT_STD / float(logits.reshape(len(images), -1).std(axis=1).mean())
    head.kernel.assign(head.kernel * factor)
    if head.bias is not None:
        head.bias.assign(head.bias * factor)


def output_spread(model, spec: ZooModel) -> dict[str, float]:
    """How much the output varies across inputs, relative to its range (0: a constant)."""
    rng = np.random.default_rng(SEED + 1)
    outs = np.stack(
        [
            np.asarray(model(x[None], training=False))[0]
            for x in random_images(rng, 4, *spec.input_range)
        ]
    )
    span = float(outs.max() - outs.min())
    across = float(outs.std(axis=0).max())
    return {
        "output_min": float(outs.min()),
        "output_max": float(outs.max()),
        "output_std": float(outs.std()),
        "spread_across_inputs": across / span if span else 0.0,
    }


def convert(model, spec: ZooModel, variant: str) -> bytes:
    """The official converter at batch 1: float32, float16 weights, or full-integer int8
    with float inputs and outputs (ranges from a representative dataset)."""
    import tempfile

    import tensorflow as tf

    # Through a SavedModel (Keras 3's export): a concrete function would keep the BatchNorm
    # statistics as resource variables (READ_VARIABLE ops) instead of constants.
    signature = tf.TensorSpec((1, IMAGE_SIZE, IMAGE_SIZE, 3), tf.float32, name="input")
    with tempfile.TemporaryDirectory() as saved:
        model.export(saved, input_signature=[signature], verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        if variant == "fp16":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.target_spec.supported_types = [tf.float16]
        elif variant == "int8":
            rng = np.random.default_rng(SEED + 2)
            images = random_images(rng, REPRESENTATIVE_IMAGES, *spec.input_range)
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = lambda: ([x[None]] for x in images)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        return converter.convert()


def check_loads(data: bytes, spec: ZooModel, model) -> float:
    """Run the converted model once in LiteRT's reference kernels; its largest difference
    from Keras relative to the output's range."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(
        model_content=data,
        num_threads=1,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
    )
    it.allocate_tensors()
    x = random_images(np.random.default_rng(SEED + 3), 1, *spec.input_range)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    want = np.asarray(model(x, training=False))
    span = float(want.max() - want.min()) or 1.0
    return float(np.abs(got - want).max()) / span


def recipe() -> str:
    """This script's hash: the models it builds change only with it (a CI cache of the zoo
    is keyed by it)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def built_by_this_recipe(manifest: dict, paths: dict[str, Path]) -> bool:
    """Whether every file of a model exists and was written by this recipe."""
    return all(
        p.exists() and manifest.get(p.name, {}).get("recipe") == recipe() for p in paths.values()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="build only these models")
    parser.add_argument("--force", action="store_true", help="rebuild files that exist")
    args = parser.parse_args(argv)
    # Checked before the first model is built: the [zoo] extra brings TensorFlow only.
    if importlib.util.find_spec("ai_edge_litert") is None:
        parser.error("ai-edge-litert checks every file: pip install -e '.[zoo,reference]'")

    import tensorflow as tf

    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    wanted = [m for m in ZOO if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in ZOO}
    if unknown:
        parser.error(f"unknown model(s): {', '.join(sorted(unknown))}")
    for spec in wanted:
        paths = {v: args.out / f"{spec.name}__{v}.tflite" for v in spec.variants}
        if not args.force and built_by_this_recipe(manifest, paths):
            print(f"{spec.name}: present, skipped (--force rebuilds)")
            continue
        start = time.monotonic()
        model, norms = build(spec)
        spread = output_spread(model, spec)
        print(f"{spec.name}: {norms} BatchNorm layers calibrated; output {spread}")
        if spread["spread_across_inputs"] < MIN_OUTPUT_SPREAD:
            print(f"{spec.name}: output does not depend on the input; refused", file=sys.stderr)
            return 1
        for variant, path in paths.items():
            data = convert(model, spec, variant)
            error = check_loads(data, spec, model)
            path.write_bytes(data)
            manifest[path.name] = {
                "model": spec.name,
                "variant": variant,
                "input_range": list(spec.input_range),
                "bytes": len(data),
                "litert_vs_keras": error,
                "tensorflow": tf.__version__,
                "recipe": recipe(),
                **spread,
            }
            print(f"  {path.name}: {len(data) / 1e6:.1f} MB, LiteRT vs Keras {error:.2e} of range")
        manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        print(f"  {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
