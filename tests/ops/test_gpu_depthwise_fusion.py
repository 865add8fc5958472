"""A depthwise convolution computed inside the 1x1 convolution reading it, against LiteRT's
reference kernels.

MobileNet's depthwise-separable block (depthwise then pointwise) runs as one GEMM whose
A operand is the depthwise output, computed as it is loaded (opencl/depthwise_at.cl); the
depthwise output is never stored. Each case checks the output against LiteRT
(BUILTIN_REF), that one kernel covers the nodes, and which GEMM variant ran.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import pytest

from delegate_runtime import read_model
from delegate_runtime.builder import ModelBuilder, Quant
from tests.conftest import require_module
from tests.ops.test_gpu_fusion import Built, _binary, _graph, _same_conv, check_fused
from tests.ops.test_gpu_ops import PRECISIONS, opencl_device, randn
from tests.switched import switched

require_module("pyopencl", "pyopencl (the GPU delegate's OpenCL binding)")

__all__ = ["opencl_device"]  # the fixture, re-exported for this module's tests

F = np.float32


def _depthwise(g, x, shape, out_hw, k=3, stride=1, dilation=1, padding="SAME", act="NONE"):
    c = shape[-1]
    y = g.tensor("d", (shape[0], *out_hw, c), F)
    g.op(
        "DEPTHWISE_CONV_2D",
        [x, g.const("dw", randn(f"dw{k}{c}", 1, k, k, c)), g.const("db", randn(f"db{c}", c))],
        [y],
        padding=padding,
        stride_h=stride,
        stride_w=stride,
        dilation_h_factor=dilation,
        dilation_w_factor=dilation,
        depth_multiplier=1,
        fused_activation_function=act,
    )
    return y


def _pointwise(g, x, batch, hw, cin, cout, act="NONE"):
    y = g.tensor("p", (batch, *hw, cout), F)
    w = randn(f"pw{cin}{cout}", cout, 1, 1, cin, scale=1 / np.sqrt(cin))
    _same_conv(g, [x, g.const("pw", w), g.const("pb", randn(f"pb{cout}", cout))], y, act)
    return y


def separable(
    shape: tuple[int, int, int, int],
    cout: int,
    out_hw: tuple[int, int],
    **depthwise,
) -> Callable[[], Built]:
    """depthwise (options as given) -> 1x1 conv with RELU6."""

    def make() -> Built:
        b, g, (x,), ins = _graph(shape)
        d = _depthwise(g, x, shape, out_hw, **depthwise)
        g.output(_pointwise(g, d, shape[0], out_hw, shape[-1], cout, act="RELU6"))
        return Built(b.build(), ins, (1, 0))

    return make


def separable_residual() -> Built:
    """MediaPipe's BlazeBlock: depthwise -> 1x1 conv -> ADD(block input) -> RELU, one kernel."""
    shape = (1, 6, 7, 8)
    b, g, (x,), ins = _graph(shape)
    d = _depthwise(g, x, shape, (6, 7))
    p = _pointwise(g, d, 1, (6, 7), 8, 8)
    g.output(_binary(g, "ADD", p, x, shape, "y", "RELU"))
    return Built(b.build(), ins, (1, 0, 2))


def pad_depthwise_pointwise() -> Built:
    """PAD (H and W) -> VALID stride-2 depthwise -> 1x1 conv: the GEMM reads the PAD's
    input, the padding folded into the depthwise's own."""
    shape = (1, 6, 7, 8)
    b, g, (x,), ins = _graph(shape)
    padded = g.tensor("padded", (1, 8, 9, 8), F)
    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    g.op("PAD", [x, g.const("pads", pads)], [padded])
    d = _depthwise(g, padded, (1, 8, 9, 8), (3, 4), stride=2, padding="VALID")
    g.output(_pointwise(g, d, 1, (3, 4), 8, 12))
    return Built(b.build(), ins, (2, 1, 0))


def quantized_separable() -> Built:
    """float -> QUANTIZE -> int8 depthwise (RELU6) -> int8 1x1 conv -> DEQUANTIZE: the
    GEMM snaps each depthwise output to its int8 grid (coarse here) before using it."""
    shape = (1, 6, 7, 8)
    b = ModelBuilder()
    g = b.main
    x = g.input("x", shape, F)
    q = g.tensor("q", shape, np.int8, quant=Quant(0.02, -5))
    g.op("QUANTIZE", [x], [q])
    rng = np.random.default_rng(11)
    dw = g.const("dw", rng.integers(-100, 100, (1, 3, 3, 8)).astype(np.int8), quant=Quant(0.01, 0))
    db = g.const("db", np.arange(8, dtype=np.int32) * 9, quant=Quant(0.02 * 0.01, 0))
    d = g.tensor("d", shape, np.int8, quant=Quant(0.5, -128))  # coarse: the snap shows
    g.op(
        "DEPTHWISE_CONV_2D",
        [q, dw, db],
        [d],
        version=3,
        padding="SAME",
        stride_h=1,
        stride_w=1,
        depth_multiplier=1,
        fused_activation_function="RELU6",
    )
    pw = g.const("pw", rng.integers(-90, 90, (12, 1, 1, 8)).astype(np.int8), quant=Quant(0.01, 0))
    pb = g.const("pb", np.arange(12, dtype=np.int32) * 7, quant=Quant(0.5 * 0.01, 0))
    p = g.tensor("p", (1, 6, 7, 12), np.int8, quant=Quant(0.1, 2))
    g.op(
        "CONV_2D",
        [d, pw, pb],
        [p],
        version=3,
        padding="SAME",
        stride_h=1,
        stride_w=1,
        fused_activation_function="NONE",
    )
    out = g.tensor("out", (1, 6, 7, 12), F)
    g.op("DEQUANTIZE", [p], [out], version=2)
    g.output(out)
    ins = [np.random.default_rng(12).uniform(-2, 2, shape).astype(F)]
    return Built(b.build(), ins, (2, 1, 3), tol_abs=1.5 * 0.1)  # one output step (0.1)


#: case -> (builder, the GEMM kernel's suffix: "dwv" loads four channels at a time)
CASES: dict[str, tuple[Callable[[], Built], str]] = {
    "3x3-stride1-relu6": (separable((1, 6, 7, 8), 12, (6, 7), act="RELU6"), "dwv"),
    "3x3-stride2-valid": (separable((1, 9, 8, 8), 12, (4, 3), stride=2, padding="VALID"), "dwv"),
    "batch2": (separable((2, 6, 7, 8), 12, (6, 7)), "dwv"),
    # odd channels are absorbed on a small map only (the switches' depthwise_aligned)
    "5x5-dilated-odd-channels": (separable((1, 7, 7, 6), 5, (7, 7), k=5, dilation=2), "dw"),
    "7x7": (separable((1, 9, 9, 8), 12, (9, 9), k=7), "dwv"),
    "split-k": (separable((1, 7, 7, 256), 8, (7, 7)), "dwv"),
    "residual-add-relu": (separable_residual, "dwv"),
    "pad-depthwise-stride2": (pad_depthwise_pointwise, "dwv"),
    "quantized": (quantized_separable, "dwv"),
}
#: tile -> the switches' depthwise_small_tile_groups_per_cu that makes these small GEMMs take it
#: on any device (the shipped value picks by the device's compute units)
TILES = {"gemm16": float("inf"), "gemm32": 0.0}
#: kernels -> $DEVICEFARM_GPU_SPECIALIZE: the generic program's (CPU OpenCL's default) or
#: copies with each launch's integers compiled in (opencl/specialize.py, GPUs' default)
KERNELS = {"generic": "0", "specialized": "1"}


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize(
    "make,suffix,precision",
    [pytest.param(m, k, p, id=f"{n}-{p}") for n, (m, k) in CASES.items() for p in PRECISIONS],
)
def test_depthwise_runs_inside_the_pointwise_gemm(
    opencl_device, monkeypatch, make, suffix, precision, tile, kernels
):
    switched(monkeypatch, depthwise_small_tile_groups_per_cu=TILES[tile])
    monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", KERNELS[kernels])
    names = check_fused(make(), precision, runs=2)  # split K's counters reset between runs
    assert tile + suffix in names, names
    assert not any(n.startswith("depthwise") for n in names), names


def test_a_depthwise_output_read_twice_is_stored(opencl_device):
    """The depthwise output is also a model output: it runs as its own kernel."""
    from delegate_runtime.gpu.delegate import GpuSession

    shape = (1, 6, 7, 8)
    b, g, (x,), ins = _graph(shape)
    d = _depthwise(g, x, shape, (6, 7))
    g.output(_pointwise(g, d, 1, (6, 7), 8, 12))
    g.output(d)
    session = GpuSession(read_model(b.build()), log=io.StringIO())
    assert session.fused_kernels() == {}
    names = session.executors[0].kernel_names
    assert "gemm32v" in names and any(n.startswith("depthwise") for n in names), names


@pytest.mark.parametrize(
    "stride,cout,fused",
    [(1, 128, True), (1, 256, False), (2, 256, True)],
    ids=["stride1-128-channels", "stride1-256-channels", "stride2-256-channels"],
)
def test_wide_pointwise_after_a_stride1_depthwise_keeps_two_kernels(
    opencl_device, stride, cout, fused
):
    """The GEMM recomputes the depthwise output for every tile of output channels: past
    128 channels after a stride-1 depthwise that costs more than the launch it saves
    (the switches' depthwise_max_reader_channels)."""
    from delegate_runtime.gpu.delegate import GpuSession

    shape = (1, 10, 10, 16)  # more pixels than depthwise_small_map_pixels
    out_hw = (-(-10 // stride), -(-10 // stride))
    model = separable(shape, cout, out_hw, stride=stride, padding="SAME")().model
    session = GpuSession(read_model(model), log=io.StringIO())
    assert (session.fused_kernels().get(1) == (1, 0)) is fused, session.fused_kernels()


@pytest.mark.parametrize("cout,fused", [(64, True), (128, False)], ids=["64", "128"])
def test_depthwise_work_past_the_gemm_budget_keeps_two_kernels(opencl_device, cout, fused):
    """A 5x5 depthwise over 40x40x32 is 1.28 million multiply-adds, done again for every
    32-wide tile of the GEMM's output channels: 2.56 million at 64 channels (absorbed),
    5.12 million at 128, past the switches' depthwise_max_gemm_macs (two kernels, as a
    persistent kernel's layers on an H200 ran faster)."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.switches import DEFAULTS

    assert 2_560_000 <= DEFAULTS.depthwise_max_gemm_macs < 5_120_000
    model = separable((1, 40, 40, 32), cout, (40, 40), k=5, padding="SAME")().model
    session = GpuSession(read_model(model), log=io.StringIO())
    assert (session.fused_kernels().get(1) == (1, 0)) is fused, session.fused_kernels()


def test_odd_channels_off_a_small_map_keep_two_kernels(opencl_device):
    """Channels not a multiple of four: the GEMM would compute the depthwise outputs one
    at a time, slower than the launch it saves (the switches' depthwise_aligned)."""
    from delegate_runtime.gpu.delegate import GpuSession

    model = separable((1, 10, 10, 6), 8, (10, 10), padding="SAME")().model
    session = GpuSession(read_model(model), log=io.StringIO())
    assert session.fused_kernels().get(1) is None, session.fused_kernels()


@pytest.mark.parametrize(
    "cout,fused", [(176, True), (256, True), (512, False)], ids=["176", "256", "512"]
)
def test_small_map_absorbs_a_stride1_depthwise_up_to_256_channels(opencl_device, cout, fused):
    """On a 7x7 map (NASNet's last cells: 176 channels) recomputing the depthwise outputs
    per tile of channels costs less than a launch (the switches' depthwise_small_map_pixels)."""
    from delegate_runtime.gpu.delegate import GpuSession

    model = separable((1, 7, 7, 16), cout, (7, 7), padding="SAME")().model
    session = GpuSession(read_model(model), log=io.StringIO())
    assert (session.fused_kernels().get(1) == (1, 0)) is fused, session.fused_kernels()


@pytest.mark.parametrize("precision", PRECISIONS)
def test_specialized_copies_compute_what_the_generic_kernels_do(
    opencl_device, monkeypatch, precision
):
    """With specialization on, every launch runs a copy of its kernel that reads its
    buffers through the partition's arena (no sub-buffers made), GEMM and depthwise copies
    with their integer arguments compiled in, in a program holding only the model's
    kernels, and the outputs are the generic kernels' to the bit."""
    from delegate_runtime.gpu.delegate import GpuSession
    from delegate_runtime.gpu.opencl import specialize

    built = separable((1, 9, 9, 8), 12, (9, 9), k=7)()
    sessions = {}
    for kernels, flag in KERNELS.items():
        monkeypatch.setenv("DEVICEFARM_GPU_SPECIALIZE", flag)
        sessions[kernels] = GpuSession(read_model(built.model), precision, log=io.StringIO())
    ex = sessions["specialized"].executors[0]
    names = [k.function_name for k, _, _ in ex.kernels]
    assert all(specialize.SEPARATOR in n for n in names), names
    assert any(n.startswith(specialize.SPECIALIZED_PREFIXES) for n in names), names
    assert sessions["specialized"].specialized_kernels == len(set(names))
    assert ex.arena.whole and ex.arena.sub_buffers == 0
    assert not sessions["generic"].executors[0].arena.whole
    assert sessions["generic"].specialized_kernels == 0
    assert ex.kernel_names == sessions["generic"].executors[0].kernel_names
    for a, b in zip(*(s.invoke(built.inputs) for s in sessions.values()), strict=True):
        np.testing.assert_array_equal(a, b)
