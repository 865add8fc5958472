#!/usr/bin/env python3
"""Build the Keras part of the real-model zoo: keras.applications architectures at batch 1,
random weights with calibrated BatchNorm statistics, and small non-vision models (a text
classifier, a top-k head, a stacked LSTM, a log-mel front end), converted by the official
converter.

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

The non-vision models (SMALL_MODELS) carry the ops vision models do not: an embedding
lookup (GATHER), a recurrent layer (Keras 3's GRU: a WHILE loop; tf_keras's LSTM: the
converter's fused UNIDIRECTIONAL_SEQUENCE_LSTM, which Keras 3's LSTM no longer gets),
ARG_MAX, TOPK_V2, and tf.signal's STFT (RFFT2D, COMPLEX_ABS) with a mel matrix and LOG.
Builtins only: a model that would need SELECT_TF_OPS (Flex) fails to convert. Their inputs
are uniform over the input range (token ids: its integers), as tests/models draws them.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

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
    #: how inputs are drawn: smooth random images (random_images)
    inputs: ClassVar[str] = "images"
    input_shape: ClassVar[tuple[int, ...]] = (1, IMAGE_SIZE, IMAGE_SIZE, 3)
    input_dtype: ClassVar[str] = "float32"

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` inputs, stacked: smooth random images over the input range."""
        return random_images(rng, count, *self.input_range)


# Models with built-in preprocessing take pixels in [0, 255]; the others take [-1, 1]
# (their preprocess_input runs outside the model).
IMAGE_MODELS = [
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


@dataclass(frozen=True)
class SmallModel:
    """A small non-vision model built by a function of this script, with seeded random
    weights, fixed shapes and batch 1."""

    name: str
    build: Callable[[], object]  #: () -> the Keras model (Keras 3, or tf_keras)
    input_shape: tuple[int, ...]  #: batch 1 first
    input_range: tuple[float, float]  #: uniform over it; int32 inputs: its integers
    input_dtype: str = "float32"
    variants: tuple[str, ...] = ("fp32",)
    #: how inputs are drawn (tests/models draws them the same way)
    inputs: ClassVar[str] = "uniform"

    def draw(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` inputs, stacked: uniform over the input range (integer inputs: the
        floor of such a draw, as numpy's cast of it)."""
        shape = (count, *self.input_shape[1:])
        return rng.uniform(*self.input_range, shape).astype(self.input_dtype)


def random_images(rng: np.random.Generator, count: int, lo: float, hi: float) -> np.ndarray:
    """Smooth random images (coarse blobs plus fine noise) scaled to [lo, hi], NHWC float32."""
    coarse = rng.random((count, 7, 7, 3))
    coarse = coarse.repeat(IMAGE_SIZE // 7, axis=1).repeat(IMAGE_SIZE // 7, axis=2)
    fine = rng.random((count, IMAGE_SIZE, IMAGE_SIZE, 3))
    unit = np.clip(0.75 * coarse + 0.25 * fine, 0.0, 1.0)
    return (lo + (hi - lo) * unit).astype(np.float32)


def build(spec: ZooModel | SmallModel):
    """The model with random weights, and a note on what calibrated it: an architecture's
    BatchNorm statistics from images, or a small model's own builder."""
    if isinstance(spec, SmallModel):
        return spec.build(), "built by " + spec.build.__name__
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
    return model, f"{len(norms)} BatchNorm layers calibrated"


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


# -- the non-vision models ------------------------------------------------------------------

VOCAB, TOKENS, EMBED, CLASSES = 500, 16, 24, 4  #: the text classifier's sizes
FEATURES, TOPK_CLASSES, TOPK = 64, 100, 5  #: the top-k head's sizes
STEPS, CHANNELS = 20, 8  #: the LSTM's sequence: time steps x features
SAMPLE_RATE_HZ, AUDIO_SAMPLES = 16000, 4000  #: the log-mel front end's input: 0.25 s
FRAME, HOP, MEL_BANDS = 512, 160, 40  #: its STFT frame and hop (samples) and mel bands
MEL_EDGES_HZ = (20.0, 7600.0)
LOG_OFFSET = 1e-6  #: log(mel + this): silence stays finite
ALL_VARIANTS = ("fp32", "fp16", "int8")


def calibrated_head(model, spec_name: str) -> None:
    """scale_classifier on the small model's own seeded inputs."""
    spec = next(m for m in SMALL_MODELS if m.name == spec_name)
    scale_classifier(model, spec.draw(np.random.default_rng(SEED), CALIBRATION_IMAGES))


def text_gru():
    """Token ids -> Embedding -> GRU -> Dense logits -> softmax, and the class (ARG_MAX).
    Keras 3's GRU converts to a WHILE loop over the time steps."""
    import keras
    import tensorflow as tf

    class ArgMax(keras.layers.Layer):
        # NOTE: keras.ops.argmax orders -0.0 below 0.0 with a BitwiseAnd, which needs Flex.
        def call(self, x):
            return tf.math.argmax(x, axis=-1, output_type=tf.int32)

    keras.utils.set_random_seed(SEED)
    tokens = keras.Input((TOKENS,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(VOCAB, EMBED)(tokens)
    x = keras.layers.GRU(32)(x)
    logits = keras.layers.Dense(CLASSES)(x)
    model = keras.Model(tokens, [keras.layers.Softmax()(logits), ArgMax()(logits)])
    calibrated_head(keras.Model(tokens, logits), "TextGRU")
    return model


def topk_head():
    """Features -> Dense -> Dense logits -> softmax -> the TOPK largest probabilities and
    their classes (tf.math.top_k: TOPK_V2)."""
    import keras
    import tensorflow as tf

    class TopK(keras.layers.Layer):
        def call(self, x):
            values, indices = tf.math.top_k(x, k=TOPK)
            return values, indices

    keras.utils.set_random_seed(SEED)
    features = keras.Input((FEATURES,), name="features")
    x = keras.layers.Dense(128, activation="relu")(features)
    logits = keras.layers.Dense(TOPK_CLASSES)(x)
    calibrated_head(keras.Model(features, logits), "TopKHead")
    return keras.Model(features, list(TopK()(keras.layers.Softmax()(logits))))


def sequence_lstm():
    """Two stacked LSTMs (the first returning its sequence) and a Dense regression head,
    in tf_keras (Keras 2): its LSTM converts to the fused UNIDIRECTIONAL_SEQUENCE_LSTM, as
    apps built with TF_USE_LEGACY_KERAS get (Keras 3's converts to a WHILE loop)."""
    import tf_keras

    tf_keras.utils.set_random_seed(SEED)
    x = inputs = tf_keras.Input((STEPS, CHANNELS), batch_size=1, name="sequence")
    x = tf_keras.layers.LSTM(24, return_sequences=True)(x)
    x = tf_keras.layers.LSTM(16)(x)
    return tf_keras.Model(inputs, tf_keras.layers.Dense(5)(x))


def log_mel():
    """An audio front end: tf.signal.stft (framing, Hann window, RFFT2D), magnitude
    (COMPLEX_ABS), a mel filter bank (a constant matrix), log."""
    import keras
    import tensorflow as tf

    class LogMel(keras.layers.Layer):
        def call(self, audio):
            stft = tf.signal.stft(audio, frame_length=FRAME, frame_step=HOP, fft_length=FRAME)
            mel = tf.signal.linear_to_mel_weight_matrix(
                MEL_BANDS, FRAME // 2 + 1, SAMPLE_RATE_HZ, *MEL_EDGES_HZ
            )
            return tf.math.log(tf.matmul(tf.abs(stft), mel) + LOG_OFFSET)

    audio = keras.Input((AUDIO_SAMPLES,), name="audio")
    return keras.Model(audio, LogMel()(audio))


# NOTE: TextGRU has no int8 file: the converter (TensorFlow 2.21) crashes (SIGSEGV) making
# a full-integer model of its WHILE loop. SequenceLSTM has no fp16 file: tf_keras's
# conversions take 7-20 s each on two cores, and the fused LSTM's float16 weights are only
# DEQUANTIZE nodes before it (TextGRU__fp16 has them in its loop).
SMALL_MODELS = [
    SmallModel("TextGRU", text_gru, (1, TOKENS), (0.0, float(VOCAB)), "int32", ("fp32", "fp16")),
    SmallModel("TopKHead", topk_head, (1, FEATURES), (-1.0, 1.0), variants=ALL_VARIANTS),
    SmallModel(
        "SequenceLSTM", sequence_lstm, (1, STEPS, CHANNELS), (-1.0, 1.0), variants=("fp32", "int8")
    ),
    SmallModel("LogMel", log_mel, (1, AUDIO_SAMPLES), (-1.0, 1.0), variants=ALL_VARIANTS),
]
ZOO = [*IMAGE_MODELS, *SMALL_MODELS]


def outputs_of(model, x: np.ndarray) -> list[np.ndarray]:
    """The model's outputs on a batch, as a list in the model's output order."""
    out = model(x, training=False)
    return [np.asarray(y) for y in (out if isinstance(out, (list, tuple)) else [out])]


def output_spread(model, spec: ZooModel | SmallModel) -> dict[str, float]:
    """How much the first float output varies across inputs, relative to its range (0: a
    constant)."""
    rng = np.random.default_rng(SEED + 1)
    outs = np.stack(
        [
            next(y for y in outputs_of(model, x[None]) if y.dtype.kind == "f")[0]
            for x in spec.draw(rng, 4)
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


def convert(model, spec: ZooModel | SmallModel, variant: str) -> bytes:
    """The official converter at batch 1: float32, float16 weights, or full-integer int8
    with float inputs and outputs (ranges from a representative dataset)."""
    import tempfile

    import tensorflow as tf

    if type(model).__module__.startswith("tf_keras"):  # Keras 2: its own converter entry
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
        return _with_variant(converter, spec, variant).convert()
    # Through a SavedModel (Keras 3's export): a concrete function would keep the BatchNorm
    # statistics as resource variables (READ_VARIABLE ops) instead of constants.
    signature = tf.TensorSpec(spec.input_shape, spec.input_dtype, name="input")
    with tempfile.TemporaryDirectory() as saved:
        model.export(saved, input_signature=[signature], verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        return _with_variant(converter, spec, variant).convert()


def _with_variant(converter, spec: ZooModel | SmallModel, variant: str):
    import tensorflow as tf

    if variant == "fp16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "int8":
        samples = spec.draw(np.random.default_rng(SEED + 2), REPRESENTATIVE_IMAGES)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([x[None]] for x in samples)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return converter


def check_loads(data: bytes, spec: ZooModel | SmallModel, model) -> float:
    """Run the converted model once in LiteRT's reference kernels; its largest difference
    from Keras relative to each output's range (integer outputs, classes: 0 where equal)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(
        model_content=data,
        num_threads=1,
        experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
    )
    runner = it.get_signature_runner()
    x = spec.draw(np.random.default_rng(SEED + 3), 1)
    got = runner(**{runner.get_input_details().popitem()[0]: x})
    wants = outputs_of(model, x)
    # Keras 3's export names a model's outputs output_0, output_1, ...; one output keeps
    # its layer's name.
    names = [f"output_{i}" for i in range(len(wants))] if len(wants) > 1 else list(got)
    error = 0.0
    for name, want in zip(names, wants, strict=True):
        span = float(want.max() - want.min()) or 1.0
        diff = np.abs(got[name].astype(np.float64) - want.astype(np.float64)).max()
        error = max(error, float(diff) / span)
    return error


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
        model, note = build(spec)
        spread = output_spread(model, spec)
        print(f"{spec.name}: {note}; output {spread}")
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
                "inputs": spec.inputs,
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
