"""The real-model tier's cases: a zoo model with the inputs every backend gets, and LiteRT's
goldens for it (its reference kernels, or XNNPACK where those lack an op), shared by the
tier's tests (tests/models) and the benches that must see exactly its inputs.

What is missing (a model that cannot be fetched or built, LiteRT not installed) raises
zoo.ZooUnavailable; the tests turn that into a skip, or a failure under CI=true.
"""

from __future__ import annotations

import functools
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from delegate_runtime import litert, read_model
from delegate_runtime.graph import Model
from delegate_runtime.static_shapes import with_input_shapes

from . import zoo
from .zoo import ZooUnavailable


@dataclass(frozen=True)
class ZooCase:
    """One zoo model and the inputs every backend gets."""

    label: str
    path: Path
    input_range: tuple[float, float]
    photo: str | None = None  #: a photograph (zoo.PHOTOS) instead of noise: the segmenters
    smooth: bool = False  #: smooth random images like the Keras models' calibration images
    #: inputs resized ((name, shape) pairs) as the app resizes them: a dynamic-length audio
    #: input
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: ops the GPU delegate leaves to the CPU, as LiteRT's leaves them (none: fully taken)
    cpu_ops: frozenset[str] = frozenset()

    @functools.cached_property
    def data(self) -> bytes:
        return self.path.read_bytes()

    @functools.cached_property
    def model(self) -> Model:
        model = read_model(self.data)
        return with_input_shapes(model, dict(self.input_shapes)) if self.input_shapes else model

    @functools.cached_property
    def inputs(self) -> list[np.ndarray]:
        """Seeded uniform inputs over the model's input range (seed: the model's label); for
        `smooth` smooth random images instead, for `photo` that photograph."""
        return self.draw_inputs(self.label)

    def draw_inputs(self, seed: str) -> list[np.ndarray]:
        """Inputs drawn as `inputs` are, from another seed."""
        rng = np.random.default_rng(zlib.crc32(seed.encode()))
        lo, hi = self.input_range
        sg = self.model.main
        xs = [rng.uniform(lo, hi, sg.tensors[i].shape) for i in sg.inputs]
        if self.smooth:
            xs[0] = zoo.smooth_images(rng, len(xs[0]), lo, hi)
        if self.photo:
            view = photo_view(
                zoo.photo(self.photo), xs[0].shape, None if seed == self.label else rng
            )
            xs[0] = lo + (hi - lo) * view
        return [x.astype(sg.tensors[i].dtype) for x, i in zip(xs, sg.inputs, strict=True)]

    @property
    def quantized(self) -> bool:
        """Integer arithmetic inside (the int8 Keras models): compared bit for bit."""
        return self.label.endswith("__int8")


#: The other views of a photograph: a crop of this share of each side or more, mirrored
#: half the time, its brightness scaled within this span.
PHOTO_CROP, PHOTO_BRIGHTNESS = 0.75, (0.85, 1.15)


def photo_view(path: Path, shape: tuple[int, ...], rng: np.random.Generator | None) -> np.ndarray:
    """An NHWC RGB input in [0, 1] of `shape` from a photograph, resized bilinearly: the
    whole photograph, or with `rng` a random crop, mirror and brightness of it (the selfie
    segmenters find the person in every such view: a mask spanning 0 to 1)."""
    from PIL import Image

    _, h, w, _ = shape
    image = Image.open(path).convert("RGB")
    gain = 1.0
    if rng is not None:
        side = rng.uniform(PHOTO_CROP, 1.0)
        cw, ch = int(image.width * side), int(image.height * side)
        x0, y0 = (
            int(rng.integers(0, image.width - cw + 1)),
            int(rng.integers(0, image.height - ch + 1)),
        )
        image = image.crop((x0, y0, x0 + cw, y0 + ch))
        if rng.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        gain = rng.uniform(*PHOTO_BRIGHTNESS)
    pixels = np.asarray(image.resize((w, h), Image.Resampling.BILINEAR), np.float64) / 255.0
    return np.clip(pixels * gain, 0.0, 1.0)[None]


def output_scale(w: np.ndarray) -> float:
    """What tolerances are fractions of: the output's range; for a single value (a score,
    a flag: no range) its magnitude, at least 1."""
    w64 = w.astype(np.float64)
    span = float(w64.max() - w64.min())
    return span if span > 0 else max(float(np.abs(w64).max()), 1.0)


@dataclass(frozen=True)
class Golden:
    """LiteRT's outputs and which kernels made them (None: LiteRT cannot run the model),
    and per output how far LiteRT's default kernels (XNNPACK) land from the reference
    kernels: the official float noise floor (0 where XNNPACK made the golden itself)."""

    outputs: list[np.ndarray] | None
    kernels: str | None
    noise: list[float] | None = None


#: LiteRT's kernels in the order tried: reference kernels, then the default resolver
#: (XNNPACK and the builtin kernels) where the reference resolver lacks an op.
REFERENCE, XNNPACK = "reference kernels (BUILTIN_REF)", "default kernels (XNNPACK)"
ORACLES = ((REFERENCE, {"reference": True}), (XNNPACK, {}))
#: Float Keras models: XNNPACK's distance from the reference kernels is taken over the
#: golden's input and this many more seeded inputs drawn the same way (the largest, as a
#: fraction of each input's output range): float32 sum-order noise varies by an order of
#: magnitude between inputs (7e-7 to 3.8e-5 of range on these files), and one input's
#: figure is too thin a floor.
NOISE_INPUTS = 4


def xnnpack_noise(
    case: ZooCase, inputs: list[np.ndarray], reference: list[np.ndarray]
) -> list[float]:
    """Per output, max |XNNPACK - reference kernels| on `inputs` over the reference's scale."""
    xnnpack = litert.run(case.data, inputs)
    return [
        float(np.abs(x.astype(np.float64) - r.astype(np.float64)).max()) / output_scale(r)
        for x, r in zip(xnnpack, reference, strict=True)
    ]


@functools.cache
def golden(case: ZooCase) -> Golden:
    """The model's outputs in LiteRT, once per session (shared by the three backends)."""
    if not litert.available():
        raise ZooUnavailable("ai-edge-litert (the LiteRT oracle)")
    reasons = []
    for kernels, kwargs in ORACLES:
        try:
            outputs = litert.run(case.data, case.inputs, **kwargs)
        except (ValueError, RuntimeError) as e:
            if not litert.lacks_kernel(e):
                raise
            reasons.append(str(e).splitlines()[0])
            continue
        if reasons:
            warnings.warn(
                f"{case.label}: golden from LiteRT's {kernels}: {reasons[0]}", stacklevel=2
            )
            return Golden(outputs, kernels, [0.0] * len(outputs))
        noise = xnnpack_noise(case, case.inputs, outputs)
        if case.smooth and not case.quantized:  # int8: noise in output steps, one input
            for k in range(NOISE_INPUTS):
                inputs = case.draw_inputs(f"{case.label}#noise{k}")
                more = xnnpack_noise(case, inputs, litert.run(case.data, inputs, **kwargs))
                noise = [max(a, b) for a, b in zip(noise, more, strict=True)]
        scales = [output_scale(o) for o in outputs]
        return Golden(outputs, kernels, [n * s for n, s in zip(noise, scales, strict=True)])
    warnings.warn(
        f"{case.label}: LiteRT cannot run it ({reasons[-1]}); no LiteRT golden", stacklevel=2
    )
    return Golden(None, None)


def input_sets(case: ZooCase, n: int) -> list[list[np.ndarray]]:
    """The tier's inputs and n - 1 more drawn the same way (seeds LABEL#errK)."""
    return [case.inputs] + [case.draw_inputs(f"{case.label}#err{k}") for k in range(1, n)]


def goldens(case: ZooCase, sets: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The golden of each input set, from the kernels that made the tier's golden (the CPU
    reference where LiteRT cannot run the model)."""
    from delegate_runtime.interpreter import Interpreter

    gold = golden(case)
    out = []
    for k, inputs in enumerate(sets):
        if gold.outputs is None:
            out.append(Interpreter(case.model).invoke(inputs))
        elif k == 0 and inputs is case.inputs:
            out.append(gold.outputs)
        else:
            out.append(litert.run(case.data, inputs, reference=gold.kernels == REFERENCE))
    return out


def mediapipe_case(name: str) -> ZooCase:
    try:
        path = zoo.mediapipe_model(name)
    except ZooUnavailable as e:
        raise ZooUnavailable(
            f"{name}.tflite from mediapipe=={zoo.MEDIAPIPE_VERSION} on PyPI ({e})"
        ) from e
    # MediaPipe's image models take pixels normalised to [0, 1] or [-1, 1]; [0, 1] suits both.
    segmenter = name.startswith("selfie_segmentation")
    return ZooCase(name, path, (0.0, 1.0), photo="astronaut.png" if segmenter else None)


#: openWakeWord's inputs: 1760 samples of 16 kHz audio (80 ms and the 30 ms of context its
#: streaming feeds), int16-scaled as the package feeds them; its embedding model's input
#: (76 mel frames) and the classifiers' (16 embeddings) over the values they see.
OPENWAKEWORD_INPUTS = {
    "melspectrogram": ((-3000.0, 3000.0), (("serving_default_input:0", (1, 1760)),)),
    "embedding_model": ((-2.0, 4.0), ()),
}
#: hey_jarvis runs a second classifier under an IF: LiteRT's delegate leaves the IF (and
#: the RESHAPE of its bool condition) to the CPU, and so does ours.
OPENWAKEWORD_CPU_OPS = {"hey_jarvis_v0.1": frozenset({"IF", "RESHAPE"})}


def openwakeword_case(name: str) -> ZooCase:
    try:
        path = zoo.openwakeword_model(name)
    except ZooUnavailable as e:
        raise ZooUnavailable(
            f"{name}.tflite from openwakeword=={zoo.OPENWAKEWORD_VERSION} ({e})"
        ) from e
    input_range, shapes = OPENWAKEWORD_INPUTS.get(name, ((-1.0, 1.0), ()))
    return ZooCase(
        name,
        path,
        input_range,
        input_shapes=shapes,
        cpu_ops=OPENWAKEWORD_CPU_OPS.get(name, frozenset()),
    )


#: The non-vision Keras models' ops that the GPU delegate leaves to the CPU, as TFLite's
#: leaves them (gpu/support.py): int32 token arithmetic (Keras's Embedding wraps negative
#: ids: LESS, ADD, SELECT on int32), GATHER with 2-D indices (the embedding lookup, the
#: STFT's framing), WHILE (Keras 3's GRU loop), ARG_MAX, TOPK_V2, the fused
#: UNIDIRECTIONAL_SEQUENCE_LSTM, RFFT2D, COMPLEX_ABS and the RESHAPE of the complex spectrum.
KERAS_CPU_OPS = {
    "TextGRU": frozenset({"LESS", "ADD", "SELECT", "GATHER", "WHILE", "ARG_MAX"}),
    "TopKHead": frozenset({"TOPK_V2"}),
    "SequenceLSTM": frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"}),
    "LogMel": frozenset({"GATHER", "RFFT2D", "RESHAPE", "COMPLEX_ABS"}),
}


def keras_case(name: str, variant: str) -> ZooCase:
    found = zoo.keras_model(name, variant)
    if found is None:  # scripts/test.sh builds them; a bare pytest run may lack them
        raise ZooUnavailable(f"{name}__{variant}.tflite (built by scripts/make_keras_zoo.py)")
    path, input_range = found
    # Noise unlike the calibration images saturates the softmax (one-hot outputs that any
    # rounding flips): the Keras architectures get images drawn as their calibration images
    # were; the non-vision models uniform inputs, as scripts/make_keras_zoo.py drew them.
    return ZooCase(
        f"{name}__{variant}",
        path,
        input_range,
        smooth=name not in zoo.KERAS_SMALL_MODELS,
        cpu_ops=KERAS_CPU_OPS.get(name, frozenset()),
    )
