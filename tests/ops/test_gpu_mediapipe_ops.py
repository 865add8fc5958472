"""MediaPipe's six custom ops through the GPU delegate (OpenCL; PoCL where there is no GPU).

Every case must be delegated whole. Oracles: the CPU reference (tests/ops/
test_mediapipe_ops.py checks it against LiteRT) for every op, fp32 and fp16; LiteRT's
XNNPACK for Convolution2DTransposeBias; for the real models, the CPU reference on the same
inputs (fp32 within 1e-5 of the output's range; the sigmoid mask of selfie segmentation
within twice the float32 noise of LiteRT's own CPU runs, see test_mediapipe_models.py).
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest
from conftest import require
from flatbuffers import flexbuffers
from test_mediapipe_models import SELFIE, litert_in_two_pieces, load, noise, silhouette
from test_mediapipe_ops import (
    BOX,
    CROP_CASES,
    LANDMARK_CASES,
    OFFICIAL_POOL_INPUT,
    OFFICIAL_POOL_MAX,
    OFFICIAL_POOL_PLACES,
    OFFICIAL_UNPOOL_INDICES,
    OFFICIAL_UNPOOL_OUTPUT,
    OFFICIAL_UNPOOL_VALUES,
    POOL_CASES,
    RESIZE_CASES,
    SAME,
    TRANSPOSE_CASES,
    UNPOOL_CASES,
    V2_OPTIONS,
    affine,
    argmax_model,
    landmarks_matrix_model,
    official_pool_model,
    official_unpool_model,
    rand,
    transform_landmarks_model,
    transform_tensor_model,
    transpose_model,
    unpool_chain_model,
    unpool_model,
)

from delegate_runtime import litert, read_model
from delegate_runtime.interpreter import Interpreter

PRECISIONS = ("fp32", "fp16")
#: Error allowed relative to the reference's magnitude (at least 1), per storage precision.
TOL = {"fp32": 1e-5, "fp16": 2e-2}
#: Error allowed on whole models, as a fraction of the output's range.
MODEL_TOL = {"fp32": 1e-5, "fp16": 1e-2}


@pytest.fixture(scope="session")
def opencl_device() -> str:
    """The OpenCL device the delegate will pick (skip locally, fail in CI without one)."""
    try:
        from delegate_runtime.gpu.opencl.runtime import describe, list_devices

        devices = list_devices()
    except ImportError:
        devices = []
    require(bool(devices), "an OpenCL device (a GPU driver or PoCL)")
    return describe(devices[0][2]).name


def run_gpu(model: bytes, xs: list[np.ndarray], precision: str) -> list[np.ndarray]:
    """The model through the delegate, which must take every node."""
    from delegate_runtime.gpu.delegate import GpuSession

    session = GpuSession(read_model(model), precision=precision, log=io.StringIO())
    d = session.delegation
    assert d.delegated_nodes == d.total_nodes, f"not fully delegated: {d.to_dict()}"
    return session.invoke(list(xs))


def check_against_cpu(model: bytes, xs: list[np.ndarray], precision: str) -> list[np.ndarray]:
    want = Interpreter(read_model(model)).invoke(list(xs))
    got = run_gpu(model, xs, precision)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"output {i}"
        scale = max(float(np.abs(w).max(initial=0)), 1.0)
        tol = TOL[precision]
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"output {i}")
    return got


def cases(table: dict) -> list:
    return [pytest.param(name, p, id=f"{name}-{p}") for name in table for p in PRECISIONS]


# -- Convolution2DTransposeBias --------------------------------------------------------------


@pytest.mark.parametrize("case,precision", cases(TRANSPOSE_CASES))
def test_transpose_conv_bias(opencl_device, case: str, precision: str) -> None:
    shape, cout, k, stride, padding = TRANSPOSE_CASES[case]
    check_against_cpu(transpose_model(shape, cout, k, stride, padding), [rand(shape)], precision)


@pytest.mark.parametrize("case", ["k2_s2_same", "k3_s2_same_odd", "k4_s2_same"])
def test_transpose_conv_bias_fp32_matches_litert(opencl_device, case: str) -> None:
    """Oracle: LiteRT's default interpreter (its XNNPACK delegate runs the custom op)."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    shape, cout, k, stride, padding = TRANSPOSE_CASES[case]
    model, x = transpose_model(shape, cout, k, stride, padding), rand(shape)
    (want,) = litert.run(model, [x], xnnpack=True)
    (got,) = run_gpu(model, [x], "fp32")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(np.abs(want).max(), 1))


# -- MaxPoolingWithArgmax2D / MaxUnpooling2D ---------------------------------------------------


def distinct(shape: tuple[int, ...]) -> np.ndarray:
    """Distinct small integers (exact in fp16): every window has one maximum."""
    n = int(np.prod(shape))
    return (np.random.default_rng(n).permutation(n) % 2000 - 1000).reshape(shape).astype(np.float32)


@pytest.mark.parametrize("case,precision", cases(POOL_CASES))
def test_max_pool_argmax(opencl_device, case: str, precision: str) -> None:
    shape, stride, k, padding, act = POOL_CASES[case]
    x = distinct(shape) / np.float32(100)
    model = argmax_model(shape, stride, k, padding, act)
    got = check_against_cpu(model, [x], precision)
    want = Interpreter(read_model(model)).invoke([x])
    np.testing.assert_array_equal(np.trunc(got[1]), np.trunc(want[1]))  # the same places


@pytest.mark.parametrize("precision", PRECISIONS)
def test_official_pooling_cases(opencl_device, precision: str) -> None:
    """TFLite's own GPU kernel tests (MaxPoolingIndicesTest, MaxUnpoolingTest): their
    numbers, exact in both precisions."""
    got_max, got_idx = run_gpu(official_pool_model(), [OFFICIAL_POOL_INPUT], precision)
    assert got_max.reshape(-1).tolist() == OFFICIAL_POOL_MAX
    assert got_idx.reshape(-1).astype(int).tolist() == OFFICIAL_POOL_PLACES
    xs = [OFFICIAL_UNPOOL_VALUES, OFFICIAL_UNPOOL_INDICES]
    got = run_gpu(official_unpool_model(), xs, precision)[0]
    assert got.reshape(-1).tolist() == OFFICIAL_UNPOOL_OUTPUT


@pytest.mark.parametrize("case,precision", cases(UNPOOL_CASES))
def test_max_unpooling_after_argmax(opencl_device, case: str, precision: str) -> None:
    shape, k = UNPOOL_CASES[case]
    check_against_cpu(unpool_chain_model(shape, k), [distinct(shape)], precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_max_unpooling_overlapping_windows(opencl_device, precision: str) -> None:
    """Stride 1, 2x2 windows: the later input wins a shared place, as on the CPU."""
    shape = (1, 3, 4, 2)
    idx = np.random.default_rng(3).integers(0, 4, shape).astype(np.float32) + np.float32(0.1)
    check_against_cpu(unpool_model(shape, (2, 2), (1, 1)), [rand(shape), idx], precision)


# -- TransformTensorBilinear / TransformLandmarks / Landmarks2TransformMatrix --------------------


@pytest.mark.parametrize("case,precision", cases(CROP_CASES))
def test_transform_tensor_crop(opencl_device, case: str, precision: str) -> None:
    shape, out_hw, (ty, tx), version = CROP_CASES[case]
    model = transform_tensor_model(shape, out_hw, version)
    check_against_cpu(model, [rand(shape), affine(tx=tx, ty=ty)], precision)


@pytest.mark.parametrize("case,precision", cases(RESIZE_CASES))
def test_transform_tensor_scale(opencl_device, case: str, precision: str) -> None:
    shape, out_hw, version, _, _, s = RESIZE_CASES[case]
    model = transform_tensor_model(shape, out_hw, version)
    check_against_cpu(model, [rand(shape), affine(a=s, d=s)], precision)


ROTATIONS = {
    f"v{v}_{name}": (v, m)
    for v in (1, 2)
    for name, m in {
        "rotate_and_scale": affine(a=0.8, b=-0.5, tx=9.3, c=0.5, d=0.8, ty=-1.7),
        "partly_outside": affine(a=1.3, b=0.2, tx=-4.2, c=-0.1, d=1.1, ty=3.6),
    }.items()
}


@pytest.mark.parametrize("case,precision", cases(ROTATIONS))
def test_transform_tensor_affine(opencl_device, case: str, precision: str) -> None:
    version, m = ROTATIONS[case]
    shape = (1, 24, 20, 5)
    check_against_cpu(transform_tensor_model(shape, (12, 14), version), [rand(shape), m], precision)


@pytest.mark.parametrize("case,precision", cases(LANDMARK_CASES))
def test_transform_landmarks(opencl_device, case: str, precision: str) -> None:
    shape, version, dims, scale = LANDMARK_CASES[case]
    options = flexbuffers.Dumps({"dimensions": dims, "scale": scale}) if version == 1 else b""
    model = transform_landmarks_model(shape, version, options)
    check_against_cpu(model, [rand(shape, -50, 250), rand((1, 4, 4), -2, 2)], precision)


def face_like(n: int, seed: int) -> np.ndarray:
    """n landmarks scattered over a tilted oval, pixel coordinates of a 192 x 192 image."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi, n)
    r = rng.uniform(0.2, 1.0, n)
    x, y = 96 + 50 * r * np.cos(t), 96 + 70 * r * np.sin(t)
    tilt = 0.3
    xr = 96 + (x - 96) * np.cos(tilt) - (y - 96) * np.sin(tilt)
    yr = 96 + (x - 96) * np.sin(tilt) + (y - 96) * np.cos(tilt)
    return np.stack([xr, yr, rng.normal(0, 5, n)], axis=1)[None].astype(np.float32)


MATRIX_CASES = {
    "v2_box": (4, V2_OPTIONS, BOX[None]),
    "v2_face_odd_subset": (
        60,
        V2_OPTIONS
        | dict(left_rotation_idx=3, right_rotation_idx=40, subset_idxs=list(range(5, 40))),
        face_like(60, 1),
    ),
    "v2_target_rotation": (
        60,
        V2_OPTIONS | dict(target_rotation_radians=0.7, right_rotation_idx=17, scale_y=2.0),
        face_like(60, 2),
    ),
}


@pytest.mark.parametrize("case,precision", cases(MATRIX_CASES))
def test_landmarks_to_matrix_v2(opencl_device, case: str, precision: str) -> None:
    n, options, x = MATRIX_CASES[case]
    check_against_cpu(landmarks_matrix_model(n, options), [x], precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_landmarks_to_matrix_v1(opencl_device, precision: str) -> None:
    options = dict(
        dimensions=3,
        landmarks_range=192,
        left_rotation_idx=3,
        right_rotation_idx=30,
        bbox_size_multiplier=1.5,
        input_hw=[192, 192],
        output_hw=[64, 48],
        subset=list(range(0, 50, 3)),
    )
    x = face_like(50, 5).reshape(1, 1, 1, 150)
    check_against_cpu(landmarks_matrix_model(50, options, version=1), [x], precision)


def test_malformed_options_stay_on_the_cpu() -> None:
    """A node whose options the kernel would refuse is not delegated; the reason says why."""
    from delegate_runtime.gpu.support import supports

    model = read_model(landmarks_matrix_model(4, V2_OPTIONS | dict(right_rotation_idx=9)))
    ok, why = supports(model.main.operators[0], model.main)
    assert not ok and "past the 4 landmarks" in why
    model = read_model(transpose_model((1, 4, 4, 2), 2, (2, 2), (2, 2), SAME, options=b"\x01"))
    ok, why = supports(model.main.operators[0], model.main)
    assert not ok and "needs at least 12" in why
    sg = model.main
    no_bias = replace(sg.operators[0], inputs=sg.operators[0].inputs[:2])
    assert supports(no_bias, sg) == (False, "Expected 3 input tensor(s), but node has 2.")


# -- whole models ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SELFIE)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_selfie_segmentation_logits(opencl_device, name: str, precision: str) -> None:
    """The Convolution2DTransposeBias output (the model cut before its sigmoid)."""
    from mediapipe_models import prune

    model = prune(load(name), [SELFIE[name][1]])
    x = silhouette(model)
    want = Interpreter(read_model(model)).invoke([x])[0]
    got = run_gpu(model, [x], precision)[0]
    err = float(np.abs(got - want).max()) / float(want.max() - want.min())
    assert err <= MODEL_TOL[precision], f"{err:.2e} of the output's range"


@pytest.mark.parametrize("name", SELFIE)
def test_selfie_segmentation_mask_fp32(opencl_device, name: str) -> None:
    """The mask: within 1e-5 of its range, or twice LiteRT's own float32 noise on it."""
    require(litert.available(), "ai-edge-litert (the LiteRT oracle)")
    model = load(name)
    x = silhouette(model)
    want = Interpreter(read_model(model)).invoke([x])[0]
    got = run_gpu(model, [x], "fp32")[0]
    oracle = litert_in_two_pieces(model, SELFIE[name][0], x)
    spread = float(want.max() - want.min())
    ours = float(np.abs(got - want).max()) / spread
    xnnpack = float(np.abs(litert.run(model, [x], xnnpack=True)[0] - oracle).max()) / spread
    assert ours <= max(MODEL_TOL["fp32"], 2 * xnnpack), f"{ours:.2e} (XNNPACK: {xnnpack:.2e})"


@pytest.mark.parametrize("precision", PRECISIONS)
def test_face_landmark_with_attention(opencl_device, precision: str) -> None:
    model = load("face_landmark_with_attention")
    x = noise(model)
    want = Interpreter(read_model(model)).invoke([x])
    got = run_gpu(model, [x], precision)
    for g, w in zip(got, want, strict=True):  # the face flag is one value: its magnitude
        spread = float(w.max() - w.min()) if w.size > 1 else max(float(np.abs(w).max()), 1.0)
        err = float(np.abs(g - w).max()) / spread
        assert err <= MODEL_TOL[precision], f"{err:.2e} of the output's range"
