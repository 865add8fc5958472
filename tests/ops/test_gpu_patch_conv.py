"""Convolutions other than 1x1 run as a GEMM reading each output pixel's window in place.

Each output pixel's window is a row of A (records/conv.py: patch_geometry), zeros where it
reaches into the padding: windows that tile the input (MediaPipe's landmark heads, whose
window is as large as the input; iris_landmark's and hand_recrop's 2x2 stride-2 VALID
layers) and overlapping ones (3x3 stems and EfficientNetV2's fused blocks, SAME padding,
strides, dilation). Each case checks the output against LiteRT's reference kernels and
that the layer ran as a patch GEMM, not as the direct convolution.
"""

from __future__ import annotations

import numpy as np
import pytest

from delegate_runtime.builder import ModelBuilder
from delegate_runtime.gpu.opencl.staging_edges import CONVERSIONS
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import check_against_litert
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32
#: The kernels half storage adds at a partition's edges (not the layers').
BOUNDARY_CONVERSIONS = CONVERSIONS


def conv_model(
    x_shape: tuple[int, int, int, int],
    cout: int,
    k: tuple[int, int],
    stride: tuple[int, int],
    padding: str = "VALID",
    act: int = 0,
    pad_hw: tuple[int, int] | None = None,
    dilation: int = 1,
) -> tuple[bytes, list[np.ndarray]]:
    """x -> [PAD of H and W by pad_hw after] -> CONV_2D; the model and one input."""
    b = ModelBuilder()
    g = b.main
    x = g.input("x", x_shape, F)
    n, h, w, cin = x_shape
    if pad_hw is not None:
        h, w = h + pad_hw[0], w + pad_hw[1]
        padded = g.tensor("padded", (n, h, w, cin), F)
        pads = np.array([[0, 0], [0, pad_hw[0]], [0, pad_hw[1]], [0, 0]], np.int32)
        g.op("PAD", [x, g.const("pads", pads)], [padded])
        x = padded
    key = f"patch{x_shape}{cout}{k}"
    weights = g.const("w", randn(key + "w", cout, *k, cin, scale=1 / np.sqrt(cin * k[0] * k[1])))
    bias = g.const("b", randn(key + "b", cout))
    if padding == "VALID":
        eh, ew = (k[0] - 1) * dilation + 1, (k[1] - 1) * dilation + 1  # dilated window
        oh, ow = (h - eh) // stride[0] + 1, (w - ew) // stride[1] + 1
    else:
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    y = g.tensor("y", (n, oh, ow, cout), F)
    g.op(
        "CONV_2D",
        [x, weights, bias],
        [y],
        padding=padding,
        stride_h=stride[0],
        stride_w=stride[1],
        fused_activation_function=act,
        dilation_h_factor=dilation,
        dilation_w_factor=dilation,
    )
    g.output(y)
    rng = np.random.default_rng(sum(x_shape) + cout)
    return b.build(), [rng.uniform(-2, 2, x_shape).astype(F)]


CASES = {
    # iris_landmark's 2x2 stride-2 layers: four-wide loads (C a multiple of 4)
    "2x2-stride2": lambda: conv_model((1, 8, 8, 16), 12, (2, 2), (2, 2)),
    # odd sizes (the last row and column left out by VALID), three channels, batch 2:
    # one element per load, rows of several images
    "2x2-stride2-ragged-batch2": lambda: conv_model((2, 9, 7, 3), 5, (2, 2), (2, 2)),
    # SAME padding that pads nothing: the windows tile the input exactly
    "3x2-stride-3x2-same": lambda: conv_model((1, 6, 8, 4), 8, (3, 2), (3, 2), "SAME", act=3),
    # MediaPipe's heads: a window as large as the input, stride 1, one output pixel
    "whole-input-2x2": lambda: conv_model((1, 2, 2, 128), 15, (2, 2), (1, 1)),
    # a long K split across work groups (K = 3 * 3 * 64 = 576), N a multiple of 4
    "whole-input-3x3-split-k": lambda: conv_model((1, 3, 3, 64), 40, (3, 3), (1, 1), act=1),
    # overlapping windows (with 24 outputs or K >= 128: patch_gemm_min_n, _min_k). A
    # stem: 3 channels, 3x3 stride 2 SAME (padding below and right only), one element per
    # load
    "stem-3x3-stride2-same": lambda: conv_model((1, 15, 16, 3), 24, (3, 3), (2, 2), "SAME"),
    # EfficientNetV2's fused blocks: 3x3 stride 1 SAME, padding on every side, four-wide
    # loads (C a multiple of 4), batch 2
    "3x3-stride1-same-batch2": lambda: conv_model((2, 9, 10, 16), 12, (3, 3), (1, 1), "SAME", 3),
    # a long K split across work groups (K = 3 * 3 * 96 = 864) over a few output pixels
    "3x3-stride2-same-split-k": lambda: conv_model((1, 7, 7, 96), 24, (3, 3), (2, 2), "SAME"),
    # a 5x3 window, strides 2 and 1, N not a multiple of 4
    "5x3-strides-2x1-valid": lambda: conv_model((1, 11, 9, 12), 7, (5, 3), (2, 1)),
    # dilation 2, VALID
    "3x3-dilation2": lambda: conv_model((1, 10, 11, 16), 8, (3, 3), (1, 1), dilation=2),
}


def run(model: bytes, inputs: list[np.ndarray], precision: str) -> list[str]:
    """The delegate's output against LiteRT's reference kernels; the kernels it ran."""
    session = check_against_litert(model, inputs, precision)
    names = session.executors[0].kernel_names
    return [k for k in names if k not in BOUNDARY_CONVERSIONS]


def is_patch_gemm(kernel: str) -> bool:
    return kernel.startswith("gemm") and kernel.rstrip("v").endswith("p")


@pytest.mark.parametrize(
    "make,precision",
    [pytest.param(m, p, id=f"{n}-{p}") for n, m in CASES.items() for p in PRECISIONS],
)
def test_patch_convolution_matches_litert(opencl_device, make, precision):
    kernels = run(*make(), precision)
    assert [k for k in kernels if is_patch_gemm(k)], kernels
    assert not [k for k in kernels if k.startswith("conv2d_direct")], kernels


@pytest.mark.parametrize("precision", PRECISIONS)
def test_pad_before_a_patch_convolution_is_absorbed(opencl_device, precision):
    """A PAD before a 2x2 stride-2 VALID layer: one launch, the patch GEMM reading the
    PAD's input with the padding as zeros."""
    kernels = run(*conv_model((1, 7, 7, 8), 8, (2, 2), (2, 2), pad_hw=(1, 1)), precision)
    assert len(kernels) == 1 and is_patch_gemm(kernels[0]), kernels


@pytest.mark.parametrize("precision", PRECISIONS)
def test_pad_before_an_overlapping_convolution_is_absorbed(opencl_device, precision):
    """A PAD before a 3x3 stride-2 layer (as Keras writes a stem's asymmetric padding):
    one launch, the padding added to the layer's own."""
    model = conv_model((1, 9, 9, 16), 8, (3, 3), (2, 2), "SAME", pad_hw=(1, 2))
    kernels = run(*model, precision)
    assert len(kernels) == 1 and is_patch_gemm(kernels[0]), kernels


@pytest.mark.parametrize("precision", PRECISIONS)
def test_overlapping_windows_of_few_outputs_and_a_short_k_stay_direct(opencl_device, precision):
    """A 3x3 stride-1 layer of one output channel and K = 72 (pose_landmark_full's
    segmentation head): the direct convolution, faster there (patch_gemm_min_n)."""
    kernels = run(*conv_model((1, 12, 12, 8), 1, (3, 3), (1, 1), "SAME"), precision)
    assert [k.startswith("conv2d_direct") for k in kernels] == [True], kernels


@pytest.mark.parametrize(
    "name,four_wide",
    [
        ("2x2-stride2", True),  # windows tile: runs of kw * C = 32
        ("3x3-stride1-same-batch2", True),  # runs of C = 16
        ("2x2-stride2-ragged-batch2", False),  # three channels
        ("stem-3x3-stride2-same", False),
        ("whole-input-2x2", False),  # N = 15
    ],
)
def test_four_wide_loads_where_the_input_runs_allow(opencl_device, name, four_wide):
    """The vector variant (four k per load) where every aligned four lie in one contiguous
    run of the input (records/conv.py: patch_runs) and N is a multiple of 4."""
    kernels = [k for k in run(*CASES[name](), "fp32") if is_patch_gemm(k)]
    assert kernels and all(k.endswith("v") == four_wide for k in kernels), kernels
