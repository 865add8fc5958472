"""MediaPipe's production models that use its custom ops, on the CPU reference.

Models come from the mediapipe==0.10.14 wheel (tests/ops/mediapipe_models.py). Oracles:
- selfie_segmentation (+ landscape): LiteRT end to end, in two official pieces: its
  reference kernels (BUILTIN_REF) up to the input of Convolution2DTransposeBias, then its
  default interpreter (XNNPACK, the only LiteRT path that runs the custom op) from there.
  Compared: the mask and the custom op's own output (logits), on a synthetic silhouette
  (noise gives a mask of ~0 everywhere). Float32 noise before the custom op, which the
  sigmoid amplifies, puts the mask 1e-4 of its range from the oracle, for us and for
  XNNPACK alike; so the bound is 1e-5 of range or twice XNNPACK's own distance.
- face_landmark_with_attention: LiteRT cannot load it (no Landmarks2TransformMatrix), so
  the outputs that need no custom op (mesh, face flag) are compared on the model pruned to
  them (LiteRT's reference kernels); the refined lips and eyes, which go through
  Landmarks2TransformMatrix, TransformTensorBilinear and TransformLandmarks, must land on
  the mesh's own lip and eye landmarks (the subsets the model's options name).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require, run_litert
from flatbuffers import flexbuffers
from mediapipe_models import model_bytes, prune

from delegate_runtime import litert, read_model
from delegate_runtime.interpreter import Interpreter

#: Output error allowed, as a fraction of the LiteRT output's range.
RANGE_TOLERANCE = 1e-5
#: model -> (mask output, custom op output)
SELFIE = {
    "selfie_segmentation": ("activation_10", "segment"),
    "selfie_segmentation_landscape": ("segment_back", "conv2d_transpose"),
}


def load(name: str) -> bytes:
    data = model_bytes(name)
    require(data is not None, f"{name}.tflite from the mediapipe wheel on PyPI")
    return data


def input_shape(model: bytes) -> tuple[int, ...]:
    m = read_model(model).main
    return m.tensors[m.inputs[0]].shape


def noise(model: bytes, seed: int = 0) -> np.ndarray:
    shape = input_shape(model)
    return np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)


def silhouette(model: bytes) -> np.ndarray:
    """A head and shoulders in warm colours on a cool background, values in [0, 1]."""
    _, h, w, _ = input_shape(model)
    y, x = np.mgrid[0:h, 0:w] / np.array([h, w])[:, None, None]
    head = np.exp(-((y - 0.35) ** 2 / 0.02 + (x - 0.5) ** 2 / 0.01))
    body = np.exp(-((y - 0.9) ** 2 / 0.05 + (x - 0.5) ** 2 / 0.04))
    fg = np.clip(head + body, 0, 1)[..., None]
    img = fg * np.array([0.8, 0.6, 0.5]) + (1 - fg) * np.array([0.2, 0.4, 0.3])
    return img[None].astype(np.float32)


def assert_within_range(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
        spread = float(e.max() - e.min()) or 1.0
        err = float(np.abs(g - e).max()) / spread
        assert err <= RANGE_TOLERANCE, f"max error {err:.2e} of the output's range"


def run_cpu(model: bytes, x: np.ndarray) -> list[np.ndarray]:
    return Interpreter(read_model(model)).invoke([x])


def litert_in_two_pieces(model: bytes, output: str, x: np.ndarray) -> np.ndarray:
    """BUILTIN_REF up to Convolution2DTransposeBias's input, XNNPACK from there to `output`."""
    sg = read_model(model).main
    (op,) = [o for o in sg.operators if o.op == "CUSTOM:Convolution2DTransposeBias"]
    cut = sg.tensors[op.inputs[0]].name
    features = run_litert(prune(model, [cut]), [x])[0]
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    return litert.run(prune(model, [output], [cut]), [features], xnnpack=True)[0]


@pytest.mark.parametrize("name", SELFIE)
@pytest.mark.parametrize("output", ["mask", "logits"])
def test_selfie_segmentation_matches_litert(name: str, output: str) -> None:
    """Within 1e-5 of the output's range, or within twice the distance of LiteRT's own
    XNNPACK run from the same oracle where float32 noise is larger (the sigmoid's mask)."""
    model = load(name)
    mask, logits = SELFIE[name]
    part = prune(model, [mask if output == "mask" else logits])
    x = silhouette(model)
    oracle = litert_in_two_pieces(model, mask if output == "mask" else logits, x)
    spread = float(oracle.max() - oracle.min())
    ours = float(np.abs(run_cpu(part, x)[0] - oracle).max()) / spread
    xnnpack = float(np.abs(litert.run(part, [x], xnnpack=True)[0] - oracle).max()) / spread
    assert ours <= max(RANGE_TOLERANCE, 2 * xnnpack), (
        f"max error {ours:.2e} of the output's range (XNNPACK's: {xnnpack:.2e})"
    )


FACE = "face_landmark_with_attention"
#: outputs that no custom op feeds
FACE_PLAIN_OUTPUTS = ["output_mesh_identity", "conv_faceflag"]


def test_face_landmark_with_attention_plain_outputs_match_litert() -> None:
    model = prune(load(FACE), FACE_PLAIN_OUTPUTS)
    x = noise(model)
    got = run_cpu(model, x)
    expected = run_litert(model, [x])
    assert_within_range(got[:1], expected[:1])
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-5, atol=1e-4)


#: (output, Landmarks2TransformMatrix operator whose subset names the mesh landmarks)
REFINED = {
    "lips": ("output_lips", 0),
    "left_eye": ("output_left_eye", 1),
    "right_eye": ("output_right_eye", 2),
}
#: Mean and worst distance (pixels of the 192 x 192 input) of a refined landmark from the
#: mesh's: the refinement moves landmarks by a pixel or two; a wrong crop or transform
#: moves them by tens of pixels.
MEAN_PX, WORST_PX = 4.0, 10.0


@pytest.mark.parametrize("part", REFINED)
def test_face_landmark_with_attention_refines_near_the_mesh(part: str) -> None:
    model = load(FACE)
    m = read_model(model)
    output, nth = REFINED[part]
    op = [o for o in m.main.operators if o.op == "CUSTOM:Landmarks2TransformMatrix"][nth]
    subset = flexbuffers.Loads(op.options["custom_options"])["subset_idxs"]
    names = [m.main.tensors[t].name for t in m.main.outputs]
    outs = dict(zip(names, Interpreter(m).invoke([noise(model)]), strict=True))
    mesh = outs["output_mesh_identity"].reshape(-1, 3)[:, :2]
    refined = outs[output].reshape(-1, 2)
    distance = np.linalg.norm(mesh[subset] - refined, axis=1)
    assert distance.mean() < MEAN_PX and distance.max() < WORST_PX, (
        f"{part}: mean {distance.mean():.2f} px, worst {distance.max():.2f} px from the mesh"
    )
